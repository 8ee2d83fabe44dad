"""Two runs (sweeps or builds) side by side: every cell they share, with its change and verdict, worst first.

The verdict rule is ``app.analysis.compare_cells``. This is the table a CI comment on a pull request uses.
"""

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.analysis.alarms import Difference, difference
from app.analysis.compare_cells import SEVERITY, Side, verdict
from app.analysis.fallback import Ratio, ratio
from app.enums import Verdict
from app.models import Sweep
from app.results.cells import Cell


@dataclass(frozen=True)
class Change:
    base: Cell
    head: Cell
    speed: Ratio | None  # head / base tokens/s
    acceptance: Difference | None  # head - base acceptance
    verdict: Verdict


def _match_key(cell: Cell) -> tuple:
    # The build is what differs between two builds; the rest must agree for cells to be one.
    return (cell.gpu_kind, cell.backend, cell.graph_mode, cell.variant)


def compare(base: list[Cell], head: list[Cell]) -> list[Change]:
    """Cells present on both sides, worst verdict first, then by speed ratio (slowest first)."""
    before = {_match_key(c): c for c in base}
    changes = []
    for cell in head:
        old = before.get(_match_key(cell))
        if old is None:
            continue
        speed = ratio(cell.speed, old.speed) if cell.speed and old.speed else None
        moved = (difference(cell.accepted, cell.draft_tokens, old.accepted, old.draft_tokens)
                 if cell.draft_tokens and old.draft_tokens else None)
        judged = verdict(Side(bool(old.ran), old.downgraded), Side(bool(cell.ran), cell.downgraded),
                         speed=speed, acceptance=moved)
        changes.append(Change(old, cell, speed, moved, judged))
    return sorted(changes, key=lambda c: (SEVERITY[c.verdict], c.speed.value if c.speed else 1.0))


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
