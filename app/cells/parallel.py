"""A tensor-parallel cell against its one-GPU twin: the cell of the same build that measured the same, the target's
``tensor_parallel_size`` and the draft's ``draft_tensor_parallel_size`` aside, at one GPU (each at 1, or unset).

vLLM's own acceptance test expects the same acceptance whatever the tensor-parallel size; a drafter missing on some
ranks or a draft size silently ignored shows as acceptance that moves with it. Each twin pairs the two cells'
pooled counters through the verdicts' two-proportion test (``app.analysis.proportions.two_proportions``: Newcombe's
interval of the difference, flagged beyond ``MIN_EFFECT`` at ``ALPHA``) and their tokens/s through the ratio of two
pooled cells (``app.analysis.fallback.ratio``, 95 %). It reads the cells a page already pooled, never the results.
"""

import bisect
import json
from dataclasses import dataclass

from app.analysis.fallback import Ratio, ratio
from app.analysis.proportions import ProportionChange, two_proportions
from app.cells.pooling import PooledCell

TARGET, DRAFT = "engine_args.tensor_parallel_size", "speculative.draft_tensor_parallel_size"


@dataclass(frozen=True)
class Twin:
    """A cell run on more than one GPU (``sizes``: the target's and the draft's tensor-parallel size, None where
    unset) and its one-GPU twin, with the acceptance test (None unless both drafted) and the tokens/s ratio, the
    parallel cell's over the twin's (None unless both measured)."""

    cell: PooledCell
    one_gpu: PooledCell
    sizes: tuple[int | None, int | None]
    acceptance: ProportionChange | None
    speed: Ratio | None


def sizes(cell: PooledCell) -> tuple[int | None, int | None]:
    """The target's and the draft's tensor-parallel size as the cell asked them; None where it set none. A variant's
    fields are sorted by path (``app.cells.identity.variant``): each is found by bisection, as every page cell is read."""
    return tuple(_field(cell.variant.fields, path) for path in (TARGET, DRAFT))


def _field(fields: tuple[tuple[str, str], ...], path: str) -> int | None:
    at = bisect.bisect_left(fields, (path,))
    return json.loads(fields[at][1]) if at < len(fields) and fields[at][0] == path else None


def twins(cells: list[PooledCell]) -> list[Twin]:
    """Every cell of ``cells`` asked to run on more than one GPU (a size above 1) whose one-GPU twin is among them, in
    the cells' order. Two cells are twins when their build, GPU kind, backend, graph mode and every measured field
    but the two sizes agree. O(n): each cell's sizes read once, and the twins' keys only where a cell is parallel (a
    page of one-GPU cells, most of them, pays one pass)."""
    asked = [(cell, sizes(cell)) for cell in cells]
    if not any(_parallel(both) for _, both in asked):
        return []
    one_gpu = {_twin_key(cell): cell for cell, both in asked if not _parallel(both)}
    found = []
    for cell, both in asked:
        if not _parallel(both) or (twin := one_gpu.get(_twin_key(cell))) is None:
            continue
        tested = None
        if cell.draft_tokens and twin.draft_tokens:
            tested = two_proportions(twin.accepted, twin.draft_tokens, cell.accepted, cell.draft_tokens)
        speed = ratio(cell.speed, twin.speed) if cell.speed and twin.speed else None
        found.append(Twin(cell, twin, both, tested, speed))
    return found


def sentence(twin: Twin) -> str:
    """``tensor_parallel_size=2: acceptance 0.412 against 0.415 on one GPU, -0.3 points [-1.9, +1.3]: the same;
    tokens/s 1.41x [1.30, 1.52]``; a flagged difference says ``differs``, the finding vLLM's test looks for; a cell
    that measured nothing says so (``nothing measured beside the one-GPU cell (1 crashed)``)."""
    target, draft = twin.sizes
    named = " ".join(f"{name}={size}" for name, size in (("tensor_parallel_size", target),
                                                          ("draft_tensor_parallel_size", draft)) if size is not None)
    parts = [named]
    if (a := twin.acceptance) is not None:
        call = "differs" if a.flagged else "the same"
        parts.append(f"acceptance {a.head_rate:.3f} against {a.base_rate:.3f} on one GPU, {100 * a.difference:+.1f} "
                     f"points [{100 * a.low:+.1f}, {100 * a.high:+.1f}]: {call}")
    if (s := twin.speed) is not None:
        interval = f" [{s.low:.2f}, {s.high:.2f}]" if s.low is not None and s.high is not None else ""
        parts.append(f"tokens/s {s.value:.2f}x{interval}")
    if len(parts) == 1:
        parts.append("nothing measured beside the one-GPU cell" + (f" ({twin.cell.died} crashed)" if twin.cell.died else ""))
    return f"{parts[0]}: {'; '.join(parts[1:])}"


def _parallel(both: tuple[int | None, int | None]) -> bool:
    return any(size is not None and size > 1 for size in both)


def _twin_key(cell: PooledCell) -> tuple:
    rest = tuple((path, value) for path, value in cell.variant.fields if path not in (TARGET, DRAFT))
    return (cell.build, cell.gpu_kind, cell.backend, cell.graph_mode, rest)
