"""Serving cells of one GPU x backend x graph mode x build against their clients: TTFT, TPOT and ITL (p50 and p99),
tokens/s, the failed share and the speedup over the baseline of the same clients, a line per series, with intervals."""


import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

from dashboards.figures import Drawing, drawable, grid, legend_inches, whiskers

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
    # Inches: the title above, the legend's rows with each panel's ticks and label below; beside each panel its
    # y ticks' labels (up to "1.23457e+06" at 7 points), between the rows the x ticks, the label and the next title.
    axes = fig.subplots(2, 3, gridspec_kw=grid(size, left=0.7, right=0.25, top=0.62, bottom=0.62 + 0.22 * rows,
                                                across=0.85, down=0.75, columns=3, rows=2)).flatten()
    clients = sorted({p[0] for _, _, points in lines for p in points})
    colours = iter(COLOURS * len(lines))
    handles = []
    for index, (series, baseline, points) in enumerate(lines):
        colour = BASELINE_COLOUR if baseline else next(colours)
        handles.append(Line2D([], [], color=colour, marker="o", label=series))
        shift = 2 ** ((index - (len(lines) - 1) / 2) * DODGE)
        for ax, (_, log, drawn) in zip(axes, PANELS, strict=True):
            for column, style in drawn:
                _line(ax, points, COLUMNS.index(column), shift, colour, style, log=log)
    for ax, (name, log, _) in zip(axes, PANELS, strict=True):
        _axis(ax, name, log, clients)
    axes[4].set_ylim(bottom=0)
    if not axes[5].lines:
        axes[5].text(0.5, 0.5, "no baseline ran", transform=axes[5].transAxes, ha="center", va="center",
                     fontsize=8, color="#666")
    axes[5].axhline(1.0, color=BASELINE_COLOUR, linestyle=":", linewidth=1)
    handles += [Line2D([], [], color="#222", linestyle=style, label=label) for label, style in zip(PERCENTILES, ("-", "--"), strict=True)]
    fig.suptitle(title, fontsize=10, y=1 - 0.1 / size[1], va="top")
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.05 / size[1]), ncols=min(LEGEND_COLUMNS, len(handles)),
               fontsize=LEGEND_SIZE, frameon=False)
    return fig


def _line(ax: Axes, points: tuple, at: int, shift: float, colour: str, style: str, *, log: bool) -> None:
    """One series' values of one column (``COLUMNS[at]``) against clients, with whiskers; the failed share in percent.
    A log axis places no value at or below 0 (a start with one request reports 0 ms): such a point is left out."""
    scale = 100.0 if COLUMNS[at] == "failed_share" else 1.0
    kept = [(p[0] * shift, *(None if v is None else v * scale for v in p[1 + at])) for p in points
            if p[1 + at][0] is not None and not (log and p[1 + at][0] <= 0)]
    if not kept:
        return
    xs, values, lows, highs = zip(*kept, strict=True)
    ax.errorbar(xs, values, yerr=whiskers(values, lows, highs, missing=NAN), color=colour, linestyle=style,
                marker="o" if style == "-" else "^", markersize=4, capsize=3, linewidth=1.2)
    if COLUMNS[at] in ("failed_share", "speedup"):
        for x, value in zip(xs, values, strict=True):
            ax.annotate(f"{value:.0f} %" if scale != 1.0 else f"{value:.2f}x", (x, value), xytext=(4, 3),
                        textcoords="offset points", fontsize=7, color=colour)


def _axis(ax: Axes, name: str, log: bool, clients: list[int]) -> None:
    ax.set_xscale("log", base=2)
    # Room either side for the dodged points, and right of the last for its label.
    ax.set_xlim(clients[0] / 1.6, clients[-1] * 2.4)
    ax.xaxis.set_major_locator(FixedLocator(clients))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    if log:
        # Ticks at 1, 1.5, 2, 3, 5 and 7 of each decade, written plainly: latencies often span less than one decade.
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.yaxis.set_minor_locator(NullLocator())
    ax.set_title(name, fontsize=9)
    ax.set_xlabel("clients at once", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, which="major", linewidth=0.4, alpha=0.5)
