"""A cell's acceptance and tokens/s across runs, with intervals, change points ringed in orange (the pages' colour of
an alarm; red is kept for what ran less than asked: ``base.html``)."""

from datetime import UTC, datetime

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
from matplotlib.figure import Figure

from dashboards.figures import Drawing, drawable, grid, legend_inches, whiskers
from dashboards.figures.serving import COLOURS
from dashboards.frames import known_time

# Matplotlib places dates from year 1 to 9999, and its ticks and margins reach past a point at either end: a
# point is drawn no nearer those ends than a day (an imported 9999-12-31; the table shows the stored date).
FIRST, LAST = date2num(datetime(1, 1, 2, tzinfo=UTC)), date2num(datetime(9999, 12, 30, tzinfo=UTC))
# The axis runs 5 % past the points' dates either side, and at least an hour: a single date sits in two hours of
# axis, not in matplotlib's default years.
MIN_PAD_DAYS = 1 / 24
CHANGE = "#e65100"
# The least height of the acceptance axis (a rate), and of the tokens/s axis as a share of its middle.
MIN_ACCEPTANCE_SPAN = 0.1
MIN_SPAN_SHARE = 0.2
LEGEND_COLUMNS, LEGEND_SIZE = 2, 7


def history(series: list[tuple[str, pd.DataFrame]]) -> Drawing | None:
    """``series``: (label, frame) with columns when (the date a point is placed at), placed_by,
    acceptance(_low/_high), tokens_per_s(_low/_high), acceptance_change, speed_change (booleans). None when nothing ran."""
    lines = []
    for label, frame in series:
        points = tuple(
            (_x(when), *(drawable(v) for v in
             (r.acceptance, r.acceptance_low, r.acceptance_high, r.tokens_per_s, r.tokens_per_s_low, r.tokens_per_s_high)),
             bool(r.acceptance_change), bool(r.speed_change))
            for r in frame.itertuples() if (when := known_time(r.when)) is not None)
        if points:
            lines.append((label, points))
    placed = {str(frame["placed_by"].iloc[0]) for _, frame in series if not frame.empty}
    axis = {frozenset({"commit"}): "commit date (UTC)", frozenset({"run"}): "when the build first ran (UTC)"}.get(
        frozenset(placed), "commit date, or when the build first ran for series without commit dates (UTC)")
    if not lines:
        return None
    return Drawing(_figure, (tuple(lines), axis), f"Acceptance rate and output tokens/s with 95 % intervals against {axis}, "
                   f"{len(lines)} series: {'; '.join(label for label, _ in lines)}; change points ringed in orange",
                   _size(tuple(label for label, _ in lines)))


def _size(labels: tuple[str, ...]) -> tuple[float, float]:
    """One legend row per two series under both plots, so the figure grows with them; as wide as the legend."""
    columns = min(LEGEND_COLUMNS, len(labels))
    return (max(9, legend_inches(labels, LEGEND_SIZE, columns) + 0.2), 6.2 + 0.2 * -(-len(labels) // LEGEND_COLUMNS))


def _x(when: datetime) -> float:
    return min(max(float(date2num(when)), FIRST), LAST)


def _figure(lines: tuple, axis: str) -> Figure:
    # The legend goes under both plots, whole (``_size``), so no entry sits on a point.
    size = _size(tuple(label for label, _ in lines))
    fig = Figure(figsize=size)
    # Inches: the title above; below, the dates (two lines and the year beside the last), the axis label and the
    # legend's rows; beside, the y label and its ticks' labels; between the plots, nothing (they share the dates).
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw=grid(
        size, left=0.95, right=0.3, top=0.4, bottom=0.8 + 0.16 * -(-len(lines) // LEGEND_COLUMNS), down=0.15, rows=2))
    for (label, points), colour in zip(lines, COLOURS * len(lines), strict=False):
        when = [p[0] for p in points]
        for ax, offset, change_at in ((top, 1, 7), (bottom, 4, 8)):
            values = [p[offset] for p in points]
            err = whiskers(values, [p[offset + 1] for p in points], [p[offset + 2] for p in points])
            shown = [v if v is not None else float("nan") for v in values]
            ax.errorbar(when, shown, yerr=err, marker="o", capsize=3, color=colour, label=label if ax is top else None)
            changed = [(w, v) for w, v, p in zip(when, shown, points, strict=True) if p[change_at]]
            if changed:
                ax.scatter(*zip(*changed, strict=True), s=160, facecolors="none", edgecolors=CHANGE, linewidths=2, zorder=5)
    xs = [p[0] for _, points in lines for p in points]
    pad = max((max(xs) - min(xs)) * 0.05, MIN_PAD_DAYS)
    bottom.xaxis_date(tz=UTC)
    locator = AutoDateLocator(tz=UTC)
    bottom.xaxis.set_major_locator(locator)
    bottom.xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=UTC))
    bottom.set_xlim(max(min(xs) - pad, FIRST), min(max(xs) + pad, LAST))
    for ax, least in ((top, MIN_ACCEPTANCE_SPAN), (bottom, None)):
        _widen(ax, least)
        ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    top.set_ylabel("acceptance rate")
    bottom.set_ylabel("output tokens/s")
    bottom.set_xlabel(f"{axis}; orange ring: change point")
    top.set_title("History across runs (95 % intervals)", fontsize=10)
    fig.legend(*top.get_legend_handles_labels(), loc="lower center", bbox_to_anchor=(0.5, 0.05 / size[1]),
               ncols=min(LEGEND_COLUMNS, len(lines)), fontsize=LEGEND_SIZE, frameon=False)
    return fig


def _widen(ax: Axes, least: float | None) -> None:
    """At least ``least`` (else ``MIN_SPAN_SHARE`` of the middle) of y around the data, so a flat series (an
    acceptance of exactly 1) reads as a value with its neighbours, not as a span of 1e-5 in offset notation."""
    low, high = ax.get_ylim()
    middle = (low + high) / 2
    span = least if least is not None else abs(middle) * MIN_SPAN_SHARE
    if high - low < span:
        ax.set_ylim(middle - span / 2, middle + span / 2)
