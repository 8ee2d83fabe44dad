"""Per-request acceptance on a sweep's page: for each cell that recorded its requests' counters, how many requests
accepted what share of their draft tokens (``app.analysis.request_acceptance``'s fixed bins), one panel per cell."""

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from app.analysis.request_acceptance import RATE_BINS
from app.cells.pooling import PooledCell
from dashboards.figures import Drawing, grid, text_inches, wrapped

# Panels at most, in the cells' order: a sweep of 100 cells would take seconds to draw; the table lists them all.
MAX_PANELS = 12
COLUMNS = 3
# Inches: a panel's size, and around it the room for its x ticks and label (below), its title's first line (above),
# its y label and ticks beside it but for their labels' digits (``_margins`` adds those), and right of the last.
PANEL, BESIDE, RIGHT, TOP, BOTTOM, DOWN = (3.0, 1.8), 0.3, 0.2, 0.35, 0.55, 0.75
# Points: a panel's title and its ticks' labels; inches: each line of a title after the first (matplotlib's 1.2 line
# spacing).
TITLE_SIZE, TICK_SIZE = 9, 8
TITLE_LINE = TITLE_SIZE * 1.2 / 72
# (panel title, requests per bin, requests that drafted nothing)
Panel = tuple[str, tuple[int, ...], int]


def request_rates(cells: list[PooledCell]) -> Drawing | None:
    """A histogram of per-request acceptance rates (accepted / draft tokens over every measured pass of the request,
    the cell's starts pooled) for each of the first ``MAX_PANELS`` cells that recorded them; None when none did."""
    # A title no wider than its panel: a cell's label and config run past it into the next panel's title.
    panels = tuple(
        (wrapped(f"{c.label} · {c.backend} · {c.graph_mode}", TITLE_SIZE, PANEL[0]), tuple(c.requests.rate_bins),
         c.requests.no_drafts)
        for c in cells if c.requests is not None and c.method is not None
    )[:MAX_PANELS]
    if not panels:
        return None
    counted = sum(sum(bins) for _, bins, _ in panels)
    return Drawing(_figure, (panels,), f"Histograms of per-request acceptance rate for {len(panels)} cells, {counted} "
                                       "requests in all", _size(panels))


def _margins(panels: tuple[Panel, ...]) -> dict[str, float]:
    """``grid``'s margins and gaps in inches: above the panels and between their rows, room for the longest title's
    lines; left of each panel, for its y label and the largest count's digits (with matplotlib's 5 % margin above it):
    a sweep's tens of thousands of requests push the label of 0000's room off the figure, or into the panel beside."""
    more = TITLE_LINE * max(title.count("\n") for title, _, _ in panels)
    beside = BESIDE + text_inches([f"{max(max(bins) for _, bins, _ in panels) * 1.05:.0f}"], TICK_SIZE)
    return {"left": beside, "right": RIGHT, "top": TOP + more, "bottom": BOTTOM, "across": beside, "down": DOWN + more}


def _size(panels: tuple[Panel, ...]) -> tuple[float, float]:
    columns, rows = min(len(panels), COLUMNS), -(-len(panels) // COLUMNS)
    room = _margins(panels)
    return (room["left"] + room["right"] + columns * PANEL[0] + (columns - 1) * room["across"],
            room["top"] + room["bottom"] + rows * PANEL[1] + (rows - 1) * room["down"])


def _figure(panels: tuple[Panel, ...]) -> Figure:
    size = _size(panels)
    columns, rows = min(len(panels), COLUMNS), -(-len(panels) // COLUMNS)
    fig = Figure(figsize=size)
    fig.subplots_adjust(**grid(size, **_margins(panels), columns=columns, rows=rows))
    width = 1 / RATE_BINS
    for index, (title, bins, no_drafts) in enumerate(panels):
        ax = fig.add_subplot(rows, columns, index + 1)
        ax.bar([i * width for i in range(RATE_BINS)], bins, width=width, align="edge", color="#4c72b0", edgecolor="white")
        ax.set_xlim(0, 1)
        ax.set_title(title, fontsize=TITLE_SIZE)
        ax.set_xlabel("accepted / draft tokens per request" + (f" ({no_drafts} drafted nothing)" if no_drafts else ""),
                      fontsize=8)
        ax.set_ylabel("requests", fontsize=8)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: no tick at half a request
        ax.tick_params(labelsize=TICK_SIZE)
    return fig
