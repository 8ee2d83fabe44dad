"""Tokens/s as horizontal bars with their 95 % intervals, fallbacks in red: per GPU x config on the fallback view
(``speed_bars``), and per cell on a sweep's page (``dashboards.figures.throughput``)."""

import pandas as pd
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.transforms import offset_copy

from dashboards.figures import Drawing, drawable, text_inches, whiskers
from dashboards.frames import columns, known

FALLBACK, HONOURED = "#c44e52", "#4c72b0"
# What a bar reads of a cell, sorted by the first two.
COLUMNS = ("backend", "graph_mode", "resolved_graph_mode", "downgraded", "draft_eager", "tokens_per_s", "tokens_per_s_low",
           "tokens_per_s_high")
NAN = float("nan")
# (label, tokens/s, low end, high end, drawn red)
Bar = tuple[str, float, float | None, float | None, bool]
# Points: the labels' and the title's size.
LABEL_SIZE, TITLE_SIZE = 10, 10
# Inches: a bar's row, the least width of the bars' axis, the labels' gap to it, and around the axis the room for
# the x ticks' last label (right), the title (top) and the ticks with the x label (bottom).
ROW, AXIS, GAP, RIGHT, TOP, BOTTOM = 0.38, 6.2, 0.06, 0.35, 0.45, 0.6


def speed_bars(frame: pd.DataFrame, title: str) -> Drawing | None:
    """One bar per backend x graph mode requested (``frame``: ``cells_frame`` rows of one group); None when
    nothing ran. Whiskers: the 95 % interval of the pooled median (none without one). The bars' values are in the
    page's table, not written on the bars."""
    bars = tuple(
        (f"{backend} / {mode}" + (f" -> {ran}" if known(downgraded) else ""),
         speed, drawable(low), drawable(high), bool(known(downgraded) or (known(eager) and mode != "NONE")))
        for backend, mode, ran, downgraded, eager, tokens_per_s, low, high in sorted(columns(frame, COLUMNS), key=lambda r: r[:2])
        if (speed := drawable(tokens_per_s)) is not None
    )
    if not bars:
        return None
    fallbacks = sum(b[4] for b in bars)
    return drawing(bars, title, "output tokens/s: median over repeats, whiskers 95 % interval; red: downgraded or draft eager",
                   f"{title}: {len(bars)} bars of tokens/s with 95 % intervals, {fallbacks} of them downgraded or draft "
                   "eager (red)")


def drawing(bars: tuple[Bar, ...], title: str, xlabel: str, alt: str) -> Drawing:
    """``bars`` top to bottom under ``title``, the x axis named ``xlabel``."""
    return Drawing(_figure, (bars, title, xlabel), alt, _layout(bars, title, xlabel)[0])


def _layout(bars: tuple[Bar, ...], title: str, xlabel: str) -> tuple[tuple[float, float], tuple[float, float, float, float]]:
    """(the figure's size in inches, the axis' box in fractions of it): the labels' column as wide as the widest
    label, the axis as wide as ``AXIS`` or the title or the x label, whichever is widest."""
    left = text_inches([b[0] for b in bars], LABEL_SIZE) + 2 * GAP
    axis = max(AXIS, text_inches([title], TITLE_SIZE), text_inches([xlabel], LABEL_SIZE))
    width, height = left + axis + RIGHT, ROW * len(bars) + TOP + BOTTOM
    return (width, height), (left / width, BOTTOM / height, axis / width, ROW * len(bars) / height)


def _figure(bars: tuple[Bar, ...], title: str, xlabel: str) -> Figure:
    labels, speeds, lows, highs, red = zip(*bars, strict=True)
    size, box = _layout(bars, title, xlabel)
    fig = Figure(figsize=size)
    ax = fig.add_axes(box)
    rows = range(len(bars))
    # One artist for the bars, one for the whiskers, a text per label and no tick per row: matplotlib's time goes per
    # artist, and a sweep's 108 cells took 2.4 s as bars, ticks and a label each. Rows by position, not by name: two
    # bars of one name would be drawn into one row.
    ax.add_collection(PolyCollection([((0, y - 0.4), (s, y - 0.4), (s, y + 0.4), (0, y + 0.4)) for y, s in zip(rows, speeds, strict=True)],
                                     facecolors=[FALLBACK if r else HONOURED for r in red], edgecolors="none"))
    # A bar without an interval gets no whisker (NaN draws none).
    ax.errorbar(speeds, rows, xerr=whiskers(speeds, lows, highs, missing=NAN), fmt="none", ecolor="black", elinewidth=1,
                capsize=3)
    ax.set_xlim(0, max([*speeds, *(high for high in highs if high is not None)]) * 1.05)
    ax.set_ylim(len(bars) - 0.5, -0.5)
    ax.set_yticks([])
    beside = offset_copy(ax.get_yaxis_transform(), fig=fig, x=-GAP * 72, units="points")
    for y, label in zip(rows, labels, strict=True):
        ax.text(0, y, label, transform=beside, ha="right", va="center", fontsize=LABEL_SIZE)
    ax.set_xlabel(xlabel, fontsize=LABEL_SIZE)
    ax.set_title(title, fontsize=TITLE_SIZE)
    return fig
