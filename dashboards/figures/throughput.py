"""A sweep's tokens/s per cell as horizontal bars, each with its 95 % interval (``dashboards.figures.bars``)."""

import pandas as pd

from dashboards.figures import Drawing, drawable
from dashboards.figures.bars import drawing
from dashboards.frames import columns, known

# What a bar reads of a cell: its label's four, then its numbers.
COLUMNS = ("gpu_kind", "backend", "graph_mode", "method", "tokens_per_s", "tokens_per_s_low", "tokens_per_s_high", "downgraded",
           "draft_eager")


def throughput_by_cell(frame: pd.DataFrame) -> Drawing | None:
    """Horizontal bars of tokens/s per cell (``dashboards.data.cells_frame``: repeats pooled) with their interval
    as error bars, red where vLLM ran less than asked (as on ``/fallback``: the graph mode downgraded, or the draft left
    eager beside captured graphs); None when nothing ran. Each cell's acceptance is in the page's table beside it, not
    written on its bar (a text per bar was a third of a drawing's time)."""
    bars = tuple(
        (" / ".join(map(str, (gpu_kind, backend, graph_mode, method))), speed, drawable(low), drawable(high),
         bool(known(downgraded) or (known(eager) and graph_mode != "NONE")))
        for gpu_kind, backend, graph_mode, method, tokens_per_s, low, high, downgraded, eager in columns(frame, COLUMNS)
        if (speed := drawable(tokens_per_s)) is not None
    )
    if not bars:
        return None
    return drawing(bars, "Throughput per cell", "output tokens/s, repeats pooled, with its 95 % interval; red: downgraded "
                   "or draft eager", f"Throughput per cell: tokens/s of {len(bars)} cells with 95 % intervals, "
                   f"{sum(b[4] for b in bars)} of them downgraded or draft eager (red)")
