"""What each cell's eager fallback costs: its speed against the cells it could have been.

Two references per cell, both of the same build, GPU kind and variant (``app.cells.identity``: model,
workload, speculative config, engine arguments, environment): (a) the fastest backend that ran the
requested graph mode as requested (no downgrade), and (b) the fastest cell of any backend and graph mode.
A filter picks which cells are shown, never what they are measured against (``references``). Ratios and
intervals: ``app.analysis.fallback``.
"""

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.analysis.fallback import Ratio, ratio
from app.cells.pooling import PooledCell
from app.cells.scope import CellScope
from app.models import Sweep


@dataclass(frozen=True)
class Cost:
    cell: PooledCell
    requested: PooledCell | None  # (a), None when no backend honoured the mode
    vs_requested: Ratio | None
    best: PooledCell | None  # (b)
    vs_best: Ratio | None

    @property
    def sentence(self) -> str:
        """``FLASHINFER, dflash k=3 draft eager, target PIECEWISE (asked FULL_AND_PIECEWISE): 0.47x [0.42, 0.52] of
        FLASH_ATTN with FULL_AND_PIECEWISE (4 engine starts, 20 rounds, against 4 starts, 20 rounds)``."""
        cell = self.cell
        ref, value = self.against or (None, self.vs_best)
        draft = f", {cell.label} draft eager" if cell.draft_eager else f", {cell.label}"
        ran = ", ".join(sorted(cell.resolved_graph_modes))
        text = f"{cell.backend}{draft}, target {ran} (asked {cell.graph_mode}): {format_ratio(value)}"
        if ref is None:
            return f"{text} ({starts(cell)})"
        return f"{text} of {ref.backend} with {ref.graph_mode} ({starts(cell)}, against {starts(ref, engine=False)})"

    @property
    def against(self) -> tuple[PooledCell, Ratio | None] | None:
        """The reference a sentence costs the cell against, with the ratio: (a) where another cell ran its mode as asked,
        else (b) where another cell of its config ran faster; None where the cell is its own reference on both (its
        ratio to itself is 1 by definition, and names no cost)."""
        if self.requested is not None and self.requested is not self.cell:
            return self.requested, self.vs_requested
        if self.best is not None and self.best is not self.cell:
            return self.best, self.vs_best
        return None

    @property
    def costed(self) -> bool:
        """Whether the cell has a reference other than itself to be costed against (``against``)."""
        return self.against is not None

    @property
    def read(self) -> tuple[PooledCell, ...]:
        """The cell and the references its cost divides by."""
        return tuple(c for c in (self.cell, self.requested, self.best) if c is not None)


def format_ratio(value: Ratio | None) -> str:
    if value is None:
        return "n/a"
    if value.low is None:
        return f"{value.value:.2f}x (no interval: one round of one repeat)"
    return f"{value.value:.2f}x [{value.low:.2f}, {value.high:.2f}]"


def starts(cell: PooledCell, *, engine: bool = True) -> str:
    """``4 engine starts, 20 rounds``: what a cell's speed pools."""
    speed = cell.speed
    if speed is None:
        return "no start ran"
    noun = "engine start" if engine else "start"
    return f"{speed.repeats} {noun}{'s' if speed.repeats != 1 else ''}, {speed.rounds} round{'s' if speed.rounds != 1 else ''}"


def references(scope: CellScope, *, session: Session) -> CellScope:
    """What the cells in ``scope`` are measured against: every cell of their builds, GPU kind and method (a
    reference shares the variant, so the method), whatever backend, graph mode or sweep ``scope`` names. A sweep
    stands for its build: its cells pool every engine start of their configs there, so a sweep's view and its
    build's give one cell one cost."""
    builds = scope.builds
    if scope.sweep_id is not None:
        builds = tuple(session.scalars(select(Sweep.build).where(Sweep.id == scope.sweep_id)))
    return CellScope(build=scope.build, builds=builds, gpu_kind=scope.gpu_kind, method=scope.method)


def costs(cells: list[PooledCell], shown: CellScope | None = None) -> list[Cost]:
    """Every speculative cell that ran and ``shown`` holds (default: all), cheapest first by its ratio against (a),
    else (b); the references come from all of ``cells``, whatever ``shown`` leaves out."""
    ran = [c for c in cells if c.speed is not None and c.method is not None]
    groups: dict[tuple, list[PooledCell]] = {}
    for cell in ran:
        groups.setdefault((cell.build, cell.gpu_kind, cell.variant), []).append(cell)
    found = []
    for cell in ran:
        if shown is not None and not shown.holds(cell):
            continue
        group = groups[(cell.build, cell.gpu_kind, cell.variant)]
        honoured = [c for c in group if c.graph_mode == cell.graph_mode and not c.downgraded]
        requested = max(honoured, key=lambda c: c.speed.median) if honoured else None
        best = max(group, key=lambda c: c.speed.median)
        found.append(Cost(
            cell=cell,
            requested=requested,
            vs_requested=ratio(cell.speed, requested.speed) if requested else None,
            best=best,
            vs_best=ratio(cell.speed, best.speed),
        ))
    return sorted(found, key=lambda c: (c.vs_requested or c.vs_best).value)  # type: ignore[union-attr]


def most_expensive(found: list[Cost]) -> Cost | None:
    """The fallback (a downgrade or an eager draft) that costs most against its reference; a fallback that is its own
    reference (no cell of its config ran faster, as with the H100's draft cells, whose draft vLLM ran eagerly in every
    start) has no cost to name: its "1.00x [0.97, 1.03]" would be a ratio to itself."""
    return next((c for c in found if c.cell.fallback and c.costed), None)


def uncosted(found: list[Cost]) -> list[Cost]:
    """The fallbacks that are their own reference: vLLM ran less than they asked, and no cell of their config ran
    otherwise to cost them against."""
    return [c for c in found if c.cell.fallback and not c.costed]
