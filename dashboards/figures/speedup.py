"""One method's speedup over its baseline against load (clients, or an offline batch size), a line per k with its
95 % interval, and beside each point the speedup its spec-decode counters predict."""

import math

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from dashboards.figures import Drawing, drawable, whiskers, wrapped
from dashboards.figures.serving import BASELINE_COLOUR, COLOURS, DODGE, NAN, TICK_SIZE, spaced
from dashboards.frames import columns

SIZE = (7.0, 3.6)
# Inches: about the axis' width (the y label and its ticks take an inch left of it), what its title and the loads'
# labels have; points: the title's size.
AXIS_WIDTH, TITLE_SIZE = SIZE[0] - 1.0, 9
# The frame's columns read (``dashboards.data.speedup_frame``).
COLUMNS = ("line_number", "line", "load_unit", "k", "load", "speedup", "speedup_low", "speedup_high", "predicted_speedup")


def speedup_figures(frame: pd.DataFrame) -> dict[int, Drawing | None]:
    """A figure per line of ``frame`` (``speedup_frame`` rows), by its ``line_number``; None for a line without a
    speedup (no baseline ran). The frame is read once, a column at a time: a page over 100k results has about 200 lines."""
    found: dict[int, dict[int, list]] = {}
    titles = {}
    for number, line, unit, k, load, value, low, high, predicted in columns(frame, COLUMNS):
        titles[number] = (line, unit)
        ks = found.setdefault(number, {})
        if (value := drawable(value)) is not None:
            ks.setdefault(int(k), []).append((int(load), value, drawable(low), drawable(high), drawable(predicted)))
    return {number: _drawing(*titles[number], ks) for number, ks in found.items()}


def _drawing(title: str, unit: str, ks: dict[int, list]) -> Drawing | None:
    if not ks:
        return None
    drawn = tuple((k, tuple(sorted(points))) for k, points in sorted(ks.items()))
    return Drawing(_figure, (drawn, title, unit), f"{title}: speedup over the baseline against {unit}, one line per k "
                   f"({', '.join(str(k) for k, _ in drawn)}), with 95 % intervals and the counters' predictions", SIZE)


def _figure(ks: tuple, title: str, unit: str) -> Figure:
    fig = Figure(figsize=SIZE, layout="constrained")
    ax = fig.subplots()
    loads = sorted({p[0] for _, points in ks for p in points})
    handles = []
    for index, ((k, points), colour) in enumerate(zip(ks, COLOURS * len(ks), strict=False)):
        shift = 2 ** ((index - (len(ks) - 1) / 2) * DODGE)
        xs = [p[0] * shift for p in points]
        values = [p[1] for p in points]
        ax.errorbar(xs, values, yerr=whiskers(values, [p[2] for p in points], [p[3] for p in points], missing=NAN),
                    color=colour, marker="o", markersize=4, capsize=3, linewidth=1.2)
        predicted = [(x, p[4]) for x, p in zip(xs, points, strict=True) if p[4] is not None]
        if predicted:
            ax.scatter(*zip(*predicted, strict=True), marker="x", color=colour, s=24, linewidths=1)
        handles.append(Line2D([], [], color=colour, marker="o", label=f"k={k}"))
    handles.append(Line2D([], [], color="#222", marker="x", linestyle="", label="predicted by the counters"))
    ax.axhline(1.0, color=BASELINE_COLOUR, linestyle=":", linewidth=1)
    ax.set_xscale("log", base=2)
    low, high = loads[0] / 1.6, loads[-1] * 1.6
    ax.set_xlim(low, high)
    # Each load ticked, labelled where its label stands clear of the last one labelled.
    ax.xaxis.set_major_locator(FixedLocator(spaced(loads, AXIS_WIDTH / math.log2(high / low))))
    ax.xaxis.set_minor_locator(FixedLocator(loads))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_xlabel(unit, fontsize=8)
    ax.set_ylabel("speedup over the baseline (95 %)", fontsize=8)
    ax.tick_params(labelsize=TICK_SIZE)
    ax.grid(True, linewidth=0.4, alpha=0.5)
    # A line's title names its cell's whole config: it runs past the figure's edges on one line.
    ax.set_title(wrapped(title, TITLE_SIZE, AXIS_WIDTH), fontsize=TITLE_SIZE)
    ax.legend(handles=handles, fontsize=7, loc="best", frameon=False)
    return fig
