"""Backend x graph mode heatmaps of one metric, one panel per GPU x method, with the cells' marks written in."""

from functools import lru_cache

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure

from dashboards.figures import Drawing, drawable, to_svg
from dashboards.frames import known, known_float

METRICS = {
    "acceptance": ("acceptance rate (accepted / draft tokens)", "{:.3f}"),
    "acceptance_length": ("mean acceptance length (tokens per step)", "{:.2f}"),
    "tokens_per_s": ("output tokens/s (median over repeats)", "{:,.0f}"),
    "speedup": ("speedup over the baseline cell", "{:.2f}x"),
}
# Fixed ends where the metric has natural ones, so one colour means one value on every panel.
SCALES = {"acceptance": (0.0, 1.0)}
GRAPH_MODES = ["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]
# Inches: the least height of a panel.
MIN_HEIGHT = 3.0


def heatmap(frame: pd.DataFrame, metric: str, title: str) -> Drawing:
    """``frame``: ``cells_frame`` rows of one GPU x method. Colour: ``metric``; text: value and marks
    (``v`` downgraded, ``E`` draft eager, ``!`` alarm, ``0/1`` degenerate, crash kind for cells that only died;
    by speedup, ``baseline`` for a baseline that ran and ``no baseline ran`` for a cell that ran without one)."""
    modes = [m for m in GRAPH_MODES if m in set(frame["graph_mode"])]
    backends = sorted(set(frame["backend"]))
    cells = []
    for r in frame.itertuples():
        stored = known_float(getattr(r, metric))
        value = drawable(stored)
        marks = " ".join(m for m, on in (("v", r.downgraded), ("E", r.draft_eager), ("!", known(r.alarm)),
                                        ("0/1", r.degenerate)) if on)
        if value is not None:
            text = METRICS[metric][1].format(value)
        elif stored is not None:
            text = "off scale"
        elif metric == "speedup" and known_float(r.tokens_per_s) is not None:
            # A speedup divides by the baseline: a baseline has none, nor a cell whose baseline did not run.
            text = "no baseline ran" if r.speculative else "baseline"
        else:
            text = known(r.crash_kind) or "no data"
        cells.append((backends.index(r.backend), modes.index(r.graph_mode), value,
                      f"{text}\n{marks}" if marks else text, bool(r.ran == 0 and r.died)))
    return Drawing(_draw, (tuple(backends), tuple(modes), tuple(cells), metric, title),
                   f"{title}: {METRICS[metric][0]} of {len(cells)} cells, {len(backends)} backends by {len(modes)} graph modes, "
                   "each square with its value and marks", _size(len(backends), len(modes)))


def _size(backends: int, modes: int) -> tuple[float, float]:
    # At least MIN_HEIGHT tall: the colour bar's label runs along it, and a one-backend panel is shorter than it.
    return (1.9 * modes + 2.6, max(0.75 * backends + 1.6, MIN_HEIGHT))


@lru_cache(maxsize=512)
def _draw(backends: tuple[str, ...], modes: tuple[str, ...], cells: tuple, metric: str, title: str) -> str:
    grid = np.full((len(backends), len(modes)), np.nan)
    for row, col, value, _, _ in cells:
        grid[row, col] = np.nan if value is None else value
    fig = Figure(figsize=_size(len(backends), len(modes)))
    ax = fig.subplots()
    low, high = SCALES.get(metric, (None, None))
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=colormaps["viridis"].with_extremes(bad="#dddddd"), aspect="auto",
                      vmin=low, vmax=high)
    for row, col, value, text, dead in cells:
        light = value is not None and image.norm(value) < 0.5
        ax.text(col, row, text, ha="center", va="center", fontsize=8,
                color="white" if light or dead else "black", fontweight="bold" if "!" in text else "normal",
                bbox={"facecolor": "#424242", "edgecolor": "none"} if dead else None)
    ax.set_xticks(range(len(modes)), [m.replace("_", "_\n", 1) if len(m) > 10 else m for m in modes], fontsize=8)
    ax.set_yticks(range(len(backends)), backends, fontsize=8)
    ax.set_xlabel("graph mode requested")
    ax.set_title(title, fontsize=10)
    bar = fig.colorbar(image, ax=ax, shrink=0.9)
    bar.set_label(METRICS[metric][0], fontsize=8)
    # The key hangs under the axis label, wherever the tick labels put it, so it never overlaps them.
    ax.annotate("v downgraded · E draft eager · ! alarm · 0/1 degenerate · grey: no result", xy=(0.5, 0),
                xycoords=ax.xaxis.label, xytext=(0, -3), textcoords="offset points", ha="center", va="top",
                fontsize=7, color="#444")
    return to_svg(fig)
