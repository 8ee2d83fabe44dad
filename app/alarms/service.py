"""The graph-capture correctness alarm over cells: each graphed cell against its eager sibling.

The sibling is the same cell of the same build (``app.cells.identity``: the same variant) with graph mode NONE
on the same backend, else on another backend (the draft proposes the same tokens whatever the backend, up to
rounding). The rule and its statistics are
``app.analysis.alarms``.
"""

from dataclasses import dataclass

from app.analysis.alarms import MIN_EFFECT, Difference, difference, shifted
from app.cells.pooling import PooledCell
from app.enums import AlarmKind


@dataclass(frozen=True)
class Alarm:
    kind: AlarmKind
    cell: PooledCell
    sibling: PooledCell
    difference: Difference  # the cell's proportion minus its sibling's

    @property
    def sentence(self) -> str:
        what = "acceptance" if self.kind is AlarmKind.ACCEPTANCE else "lossless share"
        mine, theirs = proportion(self.kind, self.cell), proportion(self.kind, self.sibling)
        d = self.difference
        return (f"{self.cell.backend} {self.cell.graph_mode} ({self.cell.label}, {self.cell.build}): {what} "
                f"{mine:.3f} against {theirs:.3f} eager on {self.sibling.backend}, "
                f"{d.value * 100:+.1f} points [{d.low * 100:+.1f}, {d.high * 100:+.1f}]")


def proportion(kind: AlarmKind, cell: PooledCell) -> float:
    if kind is AlarmKind.ACCEPTANCE:
        return cell.accepted / cell.draft_tokens
    return cell.lossless_same / cell.lossless_total


def find(cells: list[PooledCell], *, min_effect: float = MIN_EFFECT) -> list[Alarm]:
    """Every alarm among ``cells``, worst drop first (``by_cell`` finds a cell's own).

    Acceptance is flagged in either direction (a rise means the eager sibling is the broken one); the
    lossless share only when it drops. Cells without drafts, eager cells and cells without an eager
    sibling in ``cells`` are not judged.
    """
    eager: dict[tuple, list[PooledCell]] = {}
    for cell in cells:
        if cell.graph_mode == "NONE" and cell.draft_tokens:
            eager.setdefault((cell.build, cell.gpu_kind, cell.variant), []).append(cell)
    found = []
    for cell in cells:
        siblings = eager.get((cell.build, cell.gpu_kind, cell.variant))
        if cell.graph_mode == "NONE" or cell.method is None or not cell.draft_tokens or not siblings:
            continue
        sibling = next((s for s in siblings if s.backend == cell.backend), siblings[0])
        moved = difference(cell.accepted, cell.draft_tokens, sibling.accepted, sibling.draft_tokens)
        if shifted(moved, min_effect):
            found.append(Alarm(AlarmKind.ACCEPTANCE, cell, sibling, moved))
        if cell.lossless_total and sibling.lossless_total:
            lost = difference(cell.lossless_same, cell.lossless_total, sibling.lossless_same, sibling.lossless_total)
            if lost.value < 0 and shifted(lost, min_effect):
                found.append(Alarm(AlarmKind.LOSSLESS, cell, sibling, lost))
    return sorted(found, key=lambda a: a.difference.value)


def by_cell(found: list[Alarm]) -> dict[tuple, list[Alarm]]:
    """The alarms of each flagged cell, by its key (``PooledCell.key``)."""
    mine: dict[tuple, list[Alarm]] = {}
    for alarm in found:
        mine.setdefault(alarm.cell.key, []).append(alarm)
    return mine
