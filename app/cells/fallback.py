"""What each cell's eager fallback costs: its speed against the cells it could have been.

Two references per cell, both of the same build, GPU kind and variant (``app.cells.identity``: model,
workload, speculative config, engine arguments, environment): (a) the fastest backend that ran the
requested graph mode as requested (no downgrade), and (b) the fastest cell of any backend and graph mode.
Ratios and intervals: ``app.analysis.fallback``.
"""

from dataclasses import dataclass

from app.analysis.fallback import Ratio, ratio
from app.cells.pooling import PooledCell


@dataclass(frozen=True)
class Cost:
    cell: PooledCell
    requested: PooledCell | None  # (a), None when no backend honoured the mode
    vs_requested: Ratio | None
    best: PooledCell | None  # (b)
    vs_best: Ratio | None

    @property
    def sentence(self) -> str:
        """``FLASHINFER, DFlash draft eager, target PIECEWISE: 0.65x [0.61, 0.69] of FLASH_ATTN with FULL_AND_PIECEWISE``."""
        cell = self.cell
        ref, value = (self.requested, self.vs_requested) if self.requested else (self.best, self.vs_best)
        draft = f", {cell.label} draft eager" if cell.draft_eager else f", {cell.label}"
        ran = ", ".join(sorted(cell.resolved_graph_modes))
        text = f"{cell.backend}{draft}, target {ran} (asked {cell.graph_mode}): {format_ratio(value)}"
        return f"{text} of {ref.backend} with {ref.graph_mode}" if ref else text


def format_ratio(value: Ratio | None) -> str:
    if value is None:
        return "n/a"
    if value.low is None:
        return f"{value.value:.2f}x (no interval: one round of one repeat)"
    return f"{value.value:.2f}x [{value.low:.2f}, {value.high:.2f}]"


def costs(cells: list[PooledCell]) -> list[Cost]:
    """Every speculative cell that ran, cheapest first by its ratio against (a), else (b)."""
    ran = [c for c in cells if c.speed is not None and c.method is not None]
    groups: dict[tuple, list[PooledCell]] = {}
    for cell in ran:
        groups.setdefault((cell.build, cell.gpu_kind, cell.variant), []).append(cell)
    found = []
    for cell in ran:
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
    """The fallback (a downgrade or an eager draft) that costs most against its reference."""
    return next((c for c in found if c.cell.fallback), None)
