"""A calibration cell's per-position rates: asked against measured with its 95 % interval, and measured minus asked,
misses in orange."""

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from dashboards.figures import Drawing, drawable, whiskers

# A miss in the orange of the page's alarm badges (red is kept for what ran less than asked: base.html).
HELD, MISSED, ASKED = "#4c72b0", "#e65100", "#222222"
# The least half-height of the difference panel: a calibrated cell's differences (a few thousandths) read as
# small against it, not as a panel of noise.
MIN_DIFFERENCE = 0.02
SIZE = (7.6, 3.3)
# A panel's 3 inches hold this many two-digit position labels at matplotlib's 10 points; a cell of more positions
# (k runs to 64) labels one in every ceil(k / MAX_LABELS) and ticks the rest.
MAX_LABELS = 16


def calibration(positions: Sequence, label: str) -> Drawing | None:
    """``positions``: ``app.cells.calibration.Position`` of one cell. Left: the rate asked for (a bar) and the
    measured ``A_i / D`` with its Wilson 95 % interval per position; right: measured minus asked with the same interval
    moved by the asked rate, so a whisker that leaves the zero line is a miss. None when nothing was asked or measured."""
    points = tuple(
        (p.number, drawable(p.expected), *((drawable(v) for v in p.measured) if p.measured else (None, None, None)), p.miss)
        for p in positions
    )
    if not any(expected is not None or rate is not None for _, expected, rate, _, _, _ in points):
        return None
    missed = [number for number, *_, miss in points if miss]
    return Drawing(_figure, (points,), f"{label}: acceptance rate asked against measured with 95 % intervals at "
                   f"{len(points)} draft positions, and measured minus asked; "
                   + (f"position {', '.join(map(str, missed))} missed" if missed else "no position missed"), SIZE)


def _figure(points: tuple[tuple[int, float | None, float | None, float | None, float | None, bool], ...]) -> Figure:
    # Fixed margins that hold the labels, not a layout engine (it measures every label twice: most of a drawing's time).
    fig = Figure(figsize=SIZE)
    rates, differences = fig.subplots(1, 2, gridspec_kw={"left": 0.09, "right": 0.99, "top": 0.97, "bottom": 0.27,
                                                        "wspace": 0.32})
    # One artist per kind of mark (the asked rates; the points that hold, the misses), not one per position.
    asked = [(number, expected) for number, expected, *_ in points if expected is not None]
    if asked:
        rates.hlines([e for _, e in asked], [n - 0.3 for n, _ in asked], [n + 0.3 for n, _ in asked], color=ASKED, linewidth=2)
    for missed, colour in ((False, HELD), (True, MISSED)):
        measured = [(number, rate, low, high) for number, _, rate, low, high, miss in points if miss == missed and rate is not None]
        if measured:
            numbers, values, lows, highs = zip(*measured, strict=True)
            rates.errorbar(numbers, values, yerr=whiskers(values, lows, highs), fmt="o", color=colour, capsize=4)
        # The asked rate is a constant: the difference's interval is the measured one moved by it.
        moved = [(number, *(v - expected if v is not None else None for v in (rate, low, high)))
                 for number, expected, rate, low, high, miss in points
                 if miss == missed and rate is not None and expected is not None]
        if moved:
            numbers, values, lows, highs = zip(*moved, strict=True)
            differences.errorbar(numbers, values, yerr=whiskers(values, lows, highs), fmt="o", color=colour, capsize=4)
    numbers = [p[0] for p in points]
    every = -(-len(numbers) // MAX_LABELS)
    for ax in (rates, differences):
        ax.set_xticks(numbers[::every])
        ax.set_xticks(numbers, minor=True)
        ax.set_xlim(min(numbers) - 0.6, max(numbers) + 0.6)
        ax.set_xlabel("draft position")
    rates.set_ylim(0, 1.05)
    rates.set_ylabel("acceptance rate $A_i / D$")
    differences.axhline(0, color=ASKED, linewidth=1, linestyle="--")
    low, high = differences.get_ylim()
    reach = max(abs(low), abs(high), MIN_DIFFERENCE)
    differences.set_ylim(-reach, reach)
    differences.set_ylabel("measured − asked")
    differences.ticklabel_format(axis="y", style="plain", useOffset=False)
    fig.legend(handles=[Line2D([], [], color=ASKED, linewidth=2, label="asked (synthetic_acceptance_rates)"),
                        Line2D([], [], color=HELD, marker="o", linestyle="none", label="measured, 95 % interval holds it"),
                        Line2D([], [], color=MISSED, marker="o", linestyle="none", label="miss: interval excludes it")],
               loc="lower center", bbox_to_anchor=(0.5, 0.0), ncols=3, fontsize=8, frameon=False)
    return fig
