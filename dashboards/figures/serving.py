"""Serving cells of one GPU x backend x graph mode x build against their clients: TTFT, TPOT and ITL (p50 and p99),
tokens/s, the failed share and the speedup over the baseline of the same clients, a line per series, with intervals."""

import math
from itertools import accumulate

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

from dashboards.figures import Drawing, drawable, grid, legend_inches, text_inches, whiskers

NAN = float("nan")
# The frame's columns drawn (``dashboards.data.serving_frame``), each with ``_low`` and ``_high``, in this order.
COLUMNS = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "itl_p50_ms", "itl_p99_ms",
           "tokens_per_s", "failed_share", "speedup")
# (title, log scale, the columns with their percentile's line style); the failed share is drawn in percent.
PANELS = (
    ("TTFT, ms", True, (("ttft_p50_ms", "-"), ("ttft_p99_ms", "--"))),
    ("TPOT, ms", True, (("tpot_p50_ms", "-"), ("tpot_p99_ms", "--"))),
    ("ITL, ms", True, (("itl_p50_ms", "-"), ("itl_p99_ms", "--"))),
    ("output tokens/s (95 %)", True, (("tokens_per_s", "-"),)),
    ("failed requests, % of sent (95 %, Wilson)", False, (("failed_share", "-"),)),
    ("speedup over the baseline, same clients (95 %)", False, (("speedup", "-"),)),
)
BASELINE_COLOUR = "#555555"
# No red among them: red means a cell ran less than it asked, on every page (``base.html``).
COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#64b5cd", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
# Octaves between the points of neighbouring series at one client count, so their whiskers stand apart.
DODGE = 0.08
LEGEND_COLUMNS, LEGEND_SIZE = 3, 8
PERCENTILES = ("p50 (latencies)", "p99 (latencies)")
# Inches: beside each panel its y ticks' labels (up to "1.23457e+06" at 7 points), and between the panels of a row.
LEFT, RIGHT, ACROSS = 0.7, 0.25, 0.85
# Points: the ticks' labels; the values written beside the failed share's and the speedup's points, a line of them
# and their offset right of the points. Inches: the least room between two labels along the clients' axis.
TICK_SIZE, VALUE_SIZE, VALUE_LINE, VALUE_OFFSET, GAP = 7, 7, 8.5, 4, 0.05
# A value to write beside its point: (clients, x, y, text, colour).
Value = tuple[int, float, float, str, str]


def serving_figure(frame: pd.DataFrame, title: str) -> Drawing | None:
    """``frame``: ``serving_frame`` rows of one GPU x backend x graph mode x build. Whiskers: each latency's
    interval of the median over engine starts (none for one start), the pooled tokens/s and speedup intervals,
    Wilson's for the failed share. None when no cell has serving figures."""
    lines = []
    for series, group in frame.groupby("series", sort=False):
        points = tuple(
            (int(r["concurrency"]), *((drawable(r[c]), drawable(r[f"{c}_low"]), drawable(r[f"{c}_high"])) for c in COLUMNS))
            for _, r in group.iterrows() if r["starts"] > 0
        )
        if points:
            lines.append((str(series), not bool(group["speculative"].iloc[0]), points))
    if not lines:
        return None
    return Drawing(_figure, (tuple(lines), title), f"{title}: TTFT, TPOT and ITL (p50 and p99), output tokens/s, failed "
                   f"requests and speedup against clients at once, {len(lines)} series: "
                   f"{'; '.join(series for series, _, _ in lines)}", _size(tuple(series for series, _, _ in lines)))


def _size(series: tuple[str, ...]) -> tuple[float, float]:
    """The legend's rows (the series and the two percentile styles) under the six panels; as wide as the legend."""
    entries = (*series, *PERCENTILES)
    columns = min(LEGEND_COLUMNS, len(entries))
    return (max(12, legend_inches(entries, LEGEND_SIZE, columns) + 0.2), 6.6 + 0.22 * -(-len(entries) // LEGEND_COLUMNS))


def _figure(lines: tuple, title: str) -> Figure:
    size = _size(tuple(series for series, _, _ in lines))
    rows = -(-(len(lines) + len(PERCENTILES)) // LEGEND_COLUMNS)
    fig = Figure(figsize=size)
    # Inches: the title above, the legend's rows with each panel's ticks and label below, between the rows the x
    # ticks, the label and the next title.
    axes = fig.subplots(2, 3, gridspec_kw=grid(size, left=LEFT, right=RIGHT, top=0.62, bottom=0.62 + 0.22 * rows,
                                                across=ACROSS, down=0.75, columns=3, rows=2)).flatten()
    clients = sorted({p[0] for _, _, points in lines for p in points})
    colours = iter(COLOURS * len(lines))
    handles: list[Line2D] = []
    values: list[list[Value]] = [[] for _ in PANELS]
    for index, (series, baseline, points) in enumerate(lines):
        colour = BASELINE_COLOUR if baseline else next(colours)
        handles.append(Line2D([], [], color=colour, marker="o", label=series))
        shift = 2 ** ((index - (len(lines) - 1) / 2) * DODGE)
        for panel, (ax, (_, log, drawn)) in enumerate(zip(axes, PANELS, strict=True)):
            for column, style in drawn:
                values[panel] += _line(ax, points, COLUMNS.index(column), shift, colour, style, log=log)
    for ax, (name, log, _) in zip(axes, PANELS, strict=True):
        _axis(ax, name, log, clients, (size[0] - LEFT - RIGHT - 2 * ACROSS) / 3)
    axes[4].set_ylim(bottom=0)
    if not axes[5].lines:
        axes[5].text(0.5, 0.5, "no baseline ran", transform=axes[5].transAxes, ha="center", va="center",
                     fontsize=8, color="#666")
    axes[5].axhline(1.0, color=BASELINE_COLOUR, linestyle=":", linewidth=1)
    for ax, written in zip(axes, values, strict=True):
        _write(ax, written)
    handles += [Line2D([], [], color="#222", linestyle=style, label=label) for label, style in zip(PERCENTILES, ("-", "--"), strict=True)]
    fig.suptitle(title, fontsize=10, y=1 - 0.1 / size[1], va="top")
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.05 / size[1]), ncols=min(LEGEND_COLUMNS, len(handles)),
               fontsize=LEGEND_SIZE, frameon=False)
    return fig


def _line(ax: Axes, points: tuple, at: int, shift: float, colour: str, style: str, *, log: bool) -> list[Value]:
    """One series' values of one column (``COLUMNS[at]``) against clients, with whiskers; the failed share in percent.
    A log axis places no value at or below 0 (a start with one request reports 0 ms): such a point is left out.
    Returns the failed share's and the speedup's values, for ``_write`` to write beside the points."""
    scale = 100.0 if COLUMNS[at] == "failed_share" else 1.0
    kept = [(p[0], p[0] * shift, *(None if v is None else v * scale for v in p[1 + at])) for p in points
            if p[1 + at][0] is not None and not (log and p[1 + at][0] <= 0)]
    if not kept:
        return []
    clients, xs, values, lows, highs = zip(*kept, strict=True)
    ax.errorbar(xs, values, yerr=whiskers(values, lows, highs, missing=NAN), color=colour, linestyle=style,
                marker="o" if style == "-" else "^", markersize=4, capsize=3, linewidth=1.2)
    if COLUMNS[at] not in ("failed_share", "speedup"):
        return []
    return [(count, x, value, f"{value:.0f} %" if scale != 1.0 else f"{value:.2f}x", colour)
            for count, x, value in zip(clients, xs, values, strict=True)]


def _write(ax: Axes, values: list[Value]) -> None:
    """Each value right of the points at its clients, stacked up from the lowest a line apart: the series' points at
    one count sit within a few points of each other (``DODGE``), so values written each beside its own point lay one
    on another (five series' ``0 %``). Placed from the axis' final limits, in the box ``grid`` fixed; a stack that would
    leave the axis' top is moved down whole, and one that would run into the last written count's is left out (the
    table under the figure has every value)."""
    ax.get_ylim()  # autoscaled now, so ``transData`` places each point where it is drawn
    to_points = 72 / ax.figure.dpi
    top, written_to = ax.bbox.y1 * to_points - VALUE_LINE, -math.inf
    for count in sorted({value[0] for value in values}):
        here = sorted((ax.transData.transform((x, y))[1] * to_points, x, y, text, colour)
                      for clients, x, y, text, colour in values if clients == count)
        right = max(x for _, x, *_ in here)
        starts = ax.transData.transform((right, here[0][2]))[0] * to_points + VALUE_OFFSET
        if starts < written_to + GAP * 72:
            continue
        written_to = starts + text_inches([text for *_, text, _ in here], VALUE_SIZE) * 72
        heights = list(accumulate((at + 3 for at, *_ in here), lambda below, own: max(own, below + VALUE_LINE)))
        sink = max(heights[-1] - top, 0.0)
        for (at, _, y, text, colour), height in zip(here, heights, strict=True):
            ax.annotate(text, (right, y), xytext=(VALUE_OFFSET, height - sink - at), textcoords="offset points",
                        fontsize=VALUE_SIZE, color=colour)


def _axis(ax: Axes, name: str, log: bool, clients: list[int], width: float) -> None:
    """``ax`` titled ``name``, ``width`` inches wide: clients on a log2 axis, each labelled where its label stands
    clear of the last one labelled (``spaced``), a tick at each."""
    ax.set_xscale("log", base=2)
    # Room either side for the dodged points, and right of the last for its label.
    low, high = clients[0] / 1.6, clients[-1] * 2.4
    ax.set_xlim(low, high)
    ax.xaxis.set_major_locator(FixedLocator(spaced(clients, width / math.log2(high / low))))
    ax.xaxis.set_minor_locator(FixedLocator(clients))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    if log:
        # Ticks at 1, 1.5, 2, 3, 5 and 7 of each decade, written plainly: latencies often span less than one decade.
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.yaxis.set_minor_locator(NullLocator())
    ax.set_title(name, fontsize=9)
    ax.set_xlabel("clients at once", fontsize=8)
    ax.tick_params(labelsize=TICK_SIZE)
    ax.grid(True, which="major", linewidth=0.4, alpha=0.5)


def spaced(counts: list[int], octave: float) -> list[int]:
    """The ``counts`` to label on a log2 axis of ``octave`` inches per doubling, at ``TICK_SIZE``: from the fewest up,
    each whose label stands ``GAP`` clear of the last one labelled; 96 beside 128 (half an octave, a third of an
    inch on a panel of 1 to 256 clients) would touch it."""
    kept = counts[:1]
    for count in counts[1:]:
        half_widths = text_inches([f"{kept[-1]:g}"], TICK_SIZE) / 2 + text_inches([f"{count:g}"], TICK_SIZE) / 2
        if math.log2(count / kept[-1]) * octave >= half_widths + GAP:
            kept.append(count)
    return kept
