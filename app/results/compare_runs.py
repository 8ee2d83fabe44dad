"""Two runs (sweeps or builds) side by side: every cell they share, with its change and verdict, worst first.

The verdict rule is ``app.analysis.verdicts`` (the numbers) under ``app.analysis.compare_cells`` (what ran).
This is the table behind the ``/compare`` page, ``GET /api/v1/compare`` and the CI comment.
"""

import statistics
from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.analysis import verdicts
from app.analysis.compare_cells import SEVERITY, Side, verdict
from app.analysis.fallback import Ratio, ratio
from app.analysis.proportions import ProportionChange
from app.enums import JobState, Verdict
from app.models import Job, Result, Sweep
from app.results import cells as cells_service
from app.results.cells import Cell, CellScope

MatchKey = tuple[str, str, str, str]


@dataclass(frozen=True)
class Change:
    base: Cell
    head: Cell
    speed: Ratio | None  # head / base tokens/s, the interval from both cells' spreads (fallback.ratio)
    numbers: verdicts.Verdict | None  # the statistics' verdict when both sides ran
    verdict: Verdict

    @property
    def acceptance(self) -> ProportionChange | None:
        """Head - base acceptance with Newcombe's interval, when both sides drafted."""
        return self.numbers.acceptance if self.numbers else None

    @property
    def reasons(self) -> tuple[str, ...]:
        return self.numbers.reasons if self.numbers else ()


def match_key(cell: Cell) -> MatchKey:
    # The build is what differs between two builds; the rest must agree for cells to be one.
    return (cell.gpu_kind, cell.backend, cell.graph_mode, cell.variant)


def compare(base: list[Cell], head: list[Cell], history: dict[MatchKey, list[float]] | None = None) -> list[Change]:
    """Cells present on both sides, worst verdict first, then by speed ratio (slowest first).

    ``history``: per cell, its tokens/s on earlier builds of the same GPU kind, oldest first (``histories``),
    from which ``verdicts.history_threshold`` learns what counts as a change.
    """
    before = {match_key(c): c for c in base}
    changes = []
    for cell in head:
        old = before.get(match_key(cell))
        if old is None:
            continue
        speed = ratio(cell.speed, old.speed) if cell.speed and old.speed else None
        numbers = None
        if old.repeats and cell.repeats:
            numbers = verdicts.cell_verdict(_sample(old), _sample(cell), history=(history or {}).get(match_key(cell), ()))
        judged = verdict(_side(old), _side(cell), numbers)
        changes.append(Change(old, cell, speed, numbers, judged))
    return sorted(changes, key=lambda c: (SEVERITY[c.verdict], c.speed.value if c.speed else 1.0))


def _side(cell: Cell) -> Side:
    # An eager draft counts beside a graphed target only: with graph mode NONE every draft is eager.
    return Side(bool(cell.ran), cell.downgraded, cell.draft_eager and cell.graph_mode != "NONE")


def _sample(cell: Cell) -> verdicts.CellSample:
    """The cell as the verdicts read it: one tokens/s per repeat (engine start), the summed counters."""
    return verdicts.CellSample(
        tokens_per_s=[r.median for r in cell.repeats], drafts=cell.drafts, draft_tokens=cell.draft_tokens,
        accepted_tokens=cell.accepted, accepted_per_position=tuple(cell.accepted_per_position),
    )


def between(*, session: Session, base: CellScope | None, head: CellScope | None) -> tuple[list[Cell], list[Cell], list[Change]]:
    """Load both sides (None: a side not named, no cells) and compare them, each head cell against its own
    history on the other builds. Returns (base cells, head cells, changes)."""
    sides = [cells_service.load(session=session, scope=scope) if scope else [] for scope in (base, head)]
    history = histories(session=session, head=sides[1], exclude={c.build for c in sides[0] + sides[1]})
    return sides[0], sides[1], compare(*sides, history=history)


def histories(*, session: Session, head: list[Cell], exclude: set[str]) -> dict[MatchKey, list[float]]:
    """Each head cell's tokens/s on other builds (not in ``exclude``: the two compared), oldest build first.

    A build's point is the median of its repeats there; builds are ordered by their first finished job.
    Reads the succeeded jobs of the head cells' GPU kinds, backends and graph modes: one query.
    """
    if not head:
        return {}
    wanted = {match_key(c) for c in head}
    stmt = (
        select(Job.build, Job.gpu_kind, Job.backend, Job.graph_mode, Job.config_hash, Job.finished_at, Result.tokens_per_s)
        .join(Result, Result.job_id == Job.id)
        .where(Job.state == JobState.SUCCEEDED, Job.build.not_in(sorted(exclude)), Result.tokens_per_s > 0,
               Job.gpu_kind.in_(sorted({k[0] for k in wanted})), Job.backend.in_(sorted({k[1] for k in wanted})),
               Job.graph_mode.in_(sorted({k[2] for k in wanted})))
    )
    rows = session.connection().execute(stmt).all()
    variants = cells_service.variants(session=session, hashes={r.config_hash for r in rows})
    points: dict[MatchKey, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    first: dict[str, object] = {}
    for r in rows:
        key = (r.gpu_kind, r.backend, r.graph_mode, variants[r.config_hash])
        if key in wanted:
            points[key][r.build].append(r.tokens_per_s)
            if r.finished_at is not None and (r.build not in first or r.finished_at < first[r.build]):
                first[r.build] = r.finished_at
    return {
        key: [statistics.median(by_build[b]) for b in sorted(by_build, key=lambda b: (first.get(b) is None, first.get(b), b))]
        for key, by_build in points.items()
    }


def default_pair(*, session: Session) -> tuple[int, int] | None:
    """(base, head) when none is named: the newest sweep and the newest earlier sweep of the same name."""
    head = session.execute(select(Sweep.id, Sweep.name).order_by(Sweep.created_at.desc(), Sweep.id.desc()).limit(1)).first()
    if head is None:
        return None
    base = session.scalar(
        select(Sweep.id).where(Sweep.name == head.name, Sweep.id != head.id)
        .order_by(Sweep.created_at.desc(), Sweep.id.desc()).limit(1)
    )
    return (base, head.id) if base is not None else None
