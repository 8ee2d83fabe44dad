"""The crash-log corpus of tests/data/crashlogs and the scores of a grouping of it.

Each log is labelled by its root cause in ``index.json``; a grouping (one signature per log) is
scored as clusterings are: purity, and precision and recall over pairs of logs. The corpus is split
by issue date (``index.json``'s ``split``): rules are tuned on the older part and our own runs, and
the newer part is held out, scored but never looked into while rules change.
"""

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from app.crashes.context import CellContext, cell_context

CORPUS = Path(__file__).resolve().parents[1] / "data" / "crashlogs"


@dataclass(frozen=True)
class Entry:
    file: str
    cause: str
    source: str
    extent: str  # "whole" or "cut"
    exit_code: int | None
    signal: int | None
    cell: dict[str, Any] | None
    date: str  # ISO date of the issue (or own run)
    date_basis: str
    note: str | None = None
    cuts: tuple[str, ...] = ()  # how a log was cut short (``CUTS``)
    gathered: str | None = None  # the day a later batch of logs was gathered (split by issue, not by date)

    @property
    def own(self) -> bool:
        return self.source.startswith("own run")

    @property
    def log(self) -> str:
        return (CORPUS / self.file).read_text()

    def context(self) -> CellContext | None:
        """What the report says ran, read as the service reads a crashed cell (``cell_context``)."""
        if self.cell is None:
            return None
        cell = self.cell
        return cell_context(log=self.log, method=cell["method"], backend=cell["backend"] or "", graph_mode=cell["graph_mode"] or "")


# The ways a public log was cut short (index.json's "about" says what each means).
CUTS = ("traceback-without-exception", "message-above-traceback", "raise-line-only", "exception-line-only", "mid-line")
TUNING, HELD_OUT = "tuning", "held-out"


def _index() -> dict[str, Any]:
    return json.loads((CORPUS / "index.json").read_text())


def load() -> list[Entry]:
    return [Entry(**{**entry, "cuts": tuple(entry.get("cuts", ()))}) for entry in _index()["logs"]]


def parts(entries: Sequence[Entry]) -> dict[str, list[int]]:
    """The indices into ``entries`` of each part, tuning first: ``HELD_OUT`` holds the public logs of
    issues dated on or after the split's date; our own runs are always tuned on (they were written,
    and read, while the rules were). A log of a later batch (``gathered``) is held out by its issue
    (``held_out_by_issue``), whatever its date."""
    held_out_from = _index()["split"]["held_out_from"]
    split: dict[str, list[int]] = {TUNING: [], HELD_OUT: []}
    for i, entry in enumerate(entries):
        by_date = not entry.own and entry.date >= held_out_from
        held_out = held_out_by_issue(entry.source) if entry.gathered is not None else by_date
        split[HELD_OUT if held_out else TUNING].append(i)
    return split


def held_out_by_issue(source: str) -> bool:
    """Whether a later batch's log is held out: the SHA-256 of its source URL is odd, so that the
    excerpts of one issue fall on one side."""
    return int(hashlib.sha256(source.encode()).hexdigest(), 16) % 2 == 1


@dataclass(frozen=True)
class Scores:
    purity: float  # share of logs in the majority cause of their group
    precision: float  # of the pairs grouped together, the share with one cause
    recall: float  # of the pairs with one cause, the share grouped together
    groups: int
    most_causes: int  # the most causes one group holds (a catch-all group holds many)


def score(causes: Sequence[str], groups: Sequence[str]) -> Scores:
    """Scores of ``groups`` (a group per log) against ``causes`` (a label per log). O(n²) pairs, n ~ 50."""
    members: dict[str, list[str]] = {}
    for cause, group in zip(causes, groups, strict=True):
        members.setdefault(group, []).append(cause)
    purity = sum(Counter(labels).most_common(1)[0][1] for labels in members.values()) / len(causes)
    together = same_cause = both = 0
    for (cause_a, group_a), (cause_b, group_b) in combinations(zip(causes, groups, strict=True), 2):
        together += group_a == group_b
        same_cause += cause_a == cause_b
        both += group_a == group_b and cause_a == cause_b
    return Scores(
        purity=purity,
        precision=both / together if together else 1.0,
        recall=both / same_cause if same_cause else 1.0,
        groups=len(members),
        most_causes=max(len(set(labels)) for labels in members.values()),
    )
