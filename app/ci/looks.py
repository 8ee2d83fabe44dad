"""More starts where they are needed: which cells of a paired comparison a look leaves open, how many more pairs
of starts each gets within the budget, and the comparison the looks add up to. Pure: reads what each look said of
each cell's tokens/s (the compare row's ``tokens_per_s_call``) and the device time spent; writes numbers.

``draftbench ci --budget-gpu-minutes N [--mde 5%]`` (app.cli.looks) looks after the first pass and after each round
of more pairs, each time at the level ``app.analysis.sequential.look_alpha`` gives for the share of the budget spent
since the last look, so the looks together keep the false-positive rate at its level. A cell is **decided** when its
call is ``worse`` or ``better``, or ``unchanged`` and the change its starts would find at 80 % power
(``detectable``) is at most ``mde`` (without ``--mde``, any ``unchanged``); a decided cell gets no more starts, and
its call stands as the look that decided it made it (a later look, at another level, does not reopen it).
"""

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.analysis.compare_cells import SEVERITY
from app.enums import Verdict
from app.schemas.compare import SpeedCall

# The most pairs one request adds to a cell (``MoreCell.pairs``).
MAX_PAIRS = 100


@dataclass(frozen=True)
class Looks:
    """What the looks did: how many, the device seconds both sweeps used of the budget, why they stopped (a
    sentence: "the budget ran out"), and the calls of the cells left open, by the head's job ids of their row."""

    count: int
    used_s: float
    budget_s: float
    stopped: str
    left: Mapping[tuple[int, ...], SpeedCall]
    mde: float | None


def decided(call: SpeedCall, mde: float | None) -> bool:
    """``worse`` and ``better`` are decided; ``unchanged`` too when ``detectable <= mde`` (any ``unchanged`` without
    an ``mde``; never without a ``detectable``, which says nothing of what these starts could find)."""
    if call.change in ("worse", "better"):
        return True
    if call.change != "unchanged":
        return False
    return mde is None or (call.detectable is not None and call.detectable <= mde)


def pairs_wanted(call: SpeedCall, mde: float | None) -> int:
    """How many more pairs the cell gets at this look: what would decide it, at most doubling its pairs.

    With ``n`` its pairs (or the fewer starts of a side, where none are paired) and ``d`` its ``detectable``, the
    change to be found is ``target = mde`` for an unchanged cell, and ``max(mde, |ratio - 1|)`` for an undecided
    one (the change seen, without ``mde``). The smallest change a mean of ``n`` differences finds shrinks as
    ``1 / sqrt(n)`` on the log scale (its t quantiles aside), so ``n' = ceil(n (ln(1 + d) / ln(1 + target))^2)``
    pairs find ``target``. It gets ``min(n, max(1, n' - n))`` more, and ``max(1, n)`` without ``d`` (no noise model)
    or a target of 0; never over ``MAX_PAIRS``. At most doubling, because ``d`` is what these starts find at this
    look's level, which early looks keep small (an alpha-spending function spends little early): sized on it
    alone, the first look asks the most pairs (in tests/ci, at a first level of 1e-4, 100 pairs of a 0.70x cell that
    4 pairs then called), where doubling lets a cell that is decided sooner stop sooner, after about log2 of its
    pairs looks.
    """
    n = call.pairs or min(call.base_starts, call.head_starts)
    target = (mde or 0.0) if call.change == "unchanged" else max(mde or 0.0, abs(call.ratio - 1))
    needed = pairs_needed(call, target)
    if needed is None:
        return min(MAX_PAIRS, max(1, n))
    return min(MAX_PAIRS, n, max(1, needed - n))


def pairs_needed(call: SpeedCall, target: float) -> int | None:
    """The pairs (or starts a side, where none are paired) that find a change of ``target`` four times in five, by
    ``n' = ceil(n (ln(1 + d) / ln(1 + target))^2)`` from the ``n`` the call rests on and what they find, ``d``
    (``detectable``); None without ``d`` (no noise model), without starts, or for a target of 0."""
    n = call.pairs or min(call.base_starts, call.head_starts)
    if call.detectable is None or target <= 0 or n == 0:
        return None
    return math.ceil(n * (math.log1p(call.detectable) / math.log1p(target)) ** 2)


def plan(wanted: Mapping[int, int], *, left_s: float, pair_s: float) -> dict[int, int]:
    """Pairs per cell index within ``left_s`` device seconds, a pair costing ``pair_s``: one pair to each cell in
    turn (by cell index) while one more fits, a cell stopping at what it wants. Empty when not one pair fits.

    Cells in turn rather than the neediest first: a budget too small for every cell's want spreads over all of
    them, so none is left with no more starts while another takes many.
    """
    chosen: dict[int, int] = {}
    left = left_s
    while True:
        added = False
        for cell in sorted(wanted):
            if chosen.get(cell, 0) < wanted[cell] and pair_s <= left:
                chosen[cell] = chosen.get(cell, 0) + 1
                left -= pair_s
                added = True
        if not added:
            return chosen


def settled(last: Mapping[str, Any], frozen: Iterable[Mapping[str, Any]], key: str = "head") -> dict[str, Any]:
    """The comparison the looks add up to: ``last`` (the last look's ``GET /api/v1/compare`` answer) with each cell
    decided earlier as the look that decided it saw it (``frozen`` rows, matched on their ``key`` side's job ids),
    its counts taken again and its rows in the compare's order (worst verdict first, then the slowest)."""
    earlier = {tuple(row[key]["job_ids"]): row for row in frozen}
    rows = [earlier.get(tuple(row[key]["job_ids"]), row) for row in last["changes"]]
    rows.sort(key=lambda row: (SEVERITY[Verdict(row["verdict"])], (row.get("speed_ratio") or {}).get("value", 1.0)))
    return {**last, "changes": rows, "counts": dict(Counter(row["verdict"] for row in rows))}
