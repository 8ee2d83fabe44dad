"""Backend x graph mode heatmaps of one metric, one panel per GPU x method, with the cells' marks written in."""

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure

from dashboards.figures import Drawing, drawable, text_inches
from dashboards.frames import columns, known, known_float

METRICS = {
    "acceptance": ("acceptance rate (accepted / draft tokens)", "{:.3f}"),
    "acceptance_length": ("mean acceptance length (tokens per step)", "{:.2f}"),
    "tokens_per_s": ("output tokens/s (median over repeats)", "{:,.0f}"),
    "speedup": ("speedup over the baseline cell", "{:.2f}x"),
}
# Fixed ends where the metric has natural ones, so one colour means one value on every panel.
SCALES = {"acceptance": (0.0, 1.0)}
GRAPH_MODES = ["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]
# What a square reads of a cell, after the metric.
COLUMNS = ("backend", "graph_mode", "downgraded", "draft_eager", "alarm", "degenerate", "tokens_per_s", "speculative",
           "crash_kind", "ran", "died")
# Points: the tick labels' and the cells' size, the title's, the key's.
SMALL, TITLE_SIZE, KEY_SIZE = 8, 10, 7
# Inches: a square per graph mode and backend; beside the squares the tick labels' gap (their ticks and pad take 0.1),
# the colour bar's gap, width and the room for its ticks; above them the title; below the two-line mode names, the x
# label and the key.
SQUARE_WIDTH, SQUARE_HEIGHT, GAP, BAR_GAP, BAR_WIDTH, BAR_TICKS, TOP, BOTTOM = 1.9, 0.75, 0.2, 0.15, 0.15, 0.55, 0.4, 0.85
KEY = ("v downgraded", "E draft eager", "! alarm", "0/1 degenerate", "grey: no value (why, written in)")
X_LABEL = "graph mode requested"


def heatmap(frame: pd.DataFrame, metric: str, title: str, scale: tuple[float, float] | None = None) -> Drawing:
    """``frame``: ``cells_frame`` rows of one GPU x method. Colour: ``metric``, over ``scale`` (a page's panels share
    one, so one colour is one value on all of them; the metric's natural ends, else the panel's own, without);
    text: value and marks (``v`` downgraded, ``E`` draft eager, ``!`` alarm, ``0/1`` degenerate), or why a square has
    no value: the crash kind of a cell that only died, ``no result`` for one that never finished a run, a baseline's
    ``baseline: no drafts`` (acceptance) or ``baseline`` (speedup), ``no baseline ran`` for a cell without one."""
    rows = columns(frame, (metric, *COLUMNS))
    modes = [m for m in GRAPH_MODES if m in {r[2] for r in rows}]
    backends = sorted({r[1] for r in rows})
    cells = []
    for shown, backend, mode, downgraded, eager, alarm, degenerate, tokens_per_s, speculative, crash_kind, ran, died in rows:
        stored = known_float(shown)
        value = drawable(stored)
        marks = " ".join(m for m, on in (("v", known(downgraded)), ("E", known(eager)), ("!", known(alarm)),
                                        ("0/1", known(degenerate))) if on)
        if value is not None:
            text = METRICS[metric][1].format(value)
        elif stored is not None:
            text = "off scale"
        elif metric == "speedup" and known_float(tokens_per_s) is not None:
            # A speedup divides by the baseline: a baseline has none, nor a cell whose baseline did not run.
            text = "no baseline ran" if known(speculative) else "baseline"
        elif metric.startswith("acceptance") and known_float(tokens_per_s) is not None and not known(speculative):
            text = "baseline: no drafts"  # it ran; without speculation there is nothing to accept
        elif known(crash_kind):
            text = known(crash_kind)
        else:
            text = "no result" if not known(ran) else "no data"
        cells.append((backends.index(backend), modes.index(mode), value,
                      f"{text}\n{marks}" if marks else text, bool(ran == 0 and known(died))))
    return Drawing(_figure, (tuple(backends), tuple(modes), tuple(cells), metric, title, scale or SCALES.get(metric)),
                   f"{title}: {METRICS[metric][0]} of {len(cells)} cells, {len(backends)} backends by {len(modes)} graph modes, "
                   "each square with its value and marks", _layout(tuple(backends), tuple(modes), metric, title)[0])


def _mode_name(mode: str) -> str:
    return mode.replace("_", "_\n", 1) if len(mode) > 10 else mode


def _layout(backends: tuple[str, ...], modes: tuple[str, ...], metric: str, title: str) -> tuple[
        tuple[float, float], tuple[float, float, float, float], tuple[float, float, float, float], str]:
    """(the figure's size in inches, the squares' box and the colour bar's in fractions of it, the key's text). The
    squares are at least as tall as the colour bar's label, which runs along the bar; the figure as wide as the title
    and the key, which start at the squares' left edge."""
    left = text_inches(backends, SMALL) + GAP
    width, height = SQUARE_WIDTH * len(modes), max(SQUARE_HEIGHT * len(backends), text_inches([METRICS[metric][0]], SMALL) + 0.2)
    right = BAR_GAP + BAR_WIDTH + BAR_TICKS + SMALL / 72
    key = key_text(width + right)
    total = left + max(width + right, text_inches([title], TITLE_SIZE), text_inches([key], KEY_SIZE)) + 0.1
    bottom = BOTTOM + key.count("\n") * KEY_SIZE / 72 * 1.2
    tall = height + TOP + bottom
    return ((total, tall), (left / total, bottom / tall, width / total, height / tall),
            ((left + width + BAR_GAP) / total, bottom / tall, BAR_WIDTH / total, height / tall), key)


def key_text(room: float) -> str:
    """``KEY``'s entries in lines no wider than ``room`` inches where they fit (a one-square panel keeps its width, so
    that a serving line's panels sit several to a row), broken only between entries."""
    lines = [KEY[0]]
    for entry in KEY[1:]:
        if text_inches([f"{lines[-1]} · {entry}"], KEY_SIZE) <= room:
            lines[-1] = f"{lines[-1]} · {entry}"
        else:
            lines.append(entry)
    return "\n".join(lines)


def _figure(backends: tuple[str, ...], modes: tuple[str, ...], cells: tuple, metric: str, title: str,
            scale: tuple[float, float] | None) -> Figure:
    grid = np.full((len(backends), len(modes)), np.nan)
    for row, col, value, _, _ in cells:
        grid[row, col] = np.nan if value is None else value
    size, squares, bar_box, key = _layout(backends, modes, metric, title)
    fig = Figure(figsize=size)
    ax = fig.add_axes(squares)
    low, high = scale or (None, None)
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=colormaps["viridis"].with_extremes(bad="#dddddd"), aspect="auto",
                      vmin=low, vmax=high)
    for row, col, value, text, dead in cells:
        light = value is not None and image.norm(value) < 0.5
        ax.text(col, row, text, ha="center", va="center", fontsize=SMALL,
                color="white" if light or dead else "black", fontweight="bold" if "!" in text else "normal",
                bbox={"facecolor": "#424242", "edgecolor": "none"} if dead else None)
    ax.set_xticks(range(len(modes)), [_mode_name(m) for m in modes], fontsize=SMALL)
    ax.set_yticks(range(len(backends)), backends, fontsize=SMALL)
    ax.set_xlabel(X_LABEL)
    ax.set_title(title, fontsize=TITLE_SIZE, loc="left")
    if scale is not None or not np.isnan(grid).all():
        # Without a value or a scale, a bar would read matplotlib's default -0.1 to 0.1 as if the squares had one.
        bar = fig.colorbar(image, cax=fig.add_axes(bar_box))
        bar.ax.tick_params(labelsize=SMALL)
        bar.set_label(METRICS[metric][0], fontsize=SMALL)
    # The key hangs under the axis label, wherever the tick labels put it, from the squares' left edge.
    ax.annotate(key, xy=(0, 0), xycoords=(ax.transAxes, ax.xaxis.label), xytext=(0, -3), textcoords="offset points",
                ha="left", va="top", fontsize=KEY_SIZE, color="#444")
    return fig


def shared_scale(frame: pd.DataFrame, metric: str) -> tuple[float, float] | None:
    """The colour scale a page's panels share: the metric's natural ends, else the ends of every drawable value of
    ``frame`` (all its panels'); None where it holds none."""
    if metric in SCALES:
        return SCALES[metric]
    values = [v for v in map(drawable, map(known_float, frame[metric].tolist())) if v is not None] if len(frame) else []
    if not values:
        return None
    low, high = min(values), max(values)
    return (low, high) if high > low else (low * 0.9, high * 1.1) if low > 0 else (low - 1, high + 1)
