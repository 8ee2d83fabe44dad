"""Per-request acceptance on a sweep's page: for each cell that recorded its requests' counters, how many requests
accepted what share of their draft tokens (``app.analysis.request_acceptance``'s fixed bins), one panel per cell."""

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from app.analysis.request_acceptance import RATE_BINS
from app.cells.pooling import PooledCell
from dashboards.figures import Drawing, grid

# Panels at most, in the cells' order: a sweep of 100 cells would take seconds to draw; the table lists them all.
MAX_PANELS = 12
COLUMNS = 3
# Inches: a panel's size, and the margins and gaps around it for its title, ticks and axis labels.
PANEL, LEFT, RIGHT, TOP, BOTTOM, ACROSS, DOWN = (3.0, 1.8), 0.6, 0.2, 0.35, 0.55, 0.55, 0.75
# (panel title, requests per bin, requests that drafted nothing)
Panel = tuple[str, tuple[int, ...], int]


def request_rates(cells: list[PooledCell]) -> Drawing | None:
    """A histogram of per-request acceptance rates (accepted / draft tokens over every measured pass of the request,
    the cell's starts pooled) for each of the first ``MAX_PANELS`` cells that recorded them; None when none did."""
    panels = tuple(
        (f"{c.label} · {c.backend} · {c.graph_mode}", tuple(c.requests.rate_bins), c.requests.no_drafts)
        for c in cells if c.requests is not None and c.method is not None
    )[:MAX_PANELS]
    if not panels:
        return None
    counted = sum(sum(bins) for _, bins, _ in panels)
    return Drawing(_figure, (panels,), f"Histograms of per-request acceptance rate for {len(panels)} cells, {counted} "
                                       "requests in all", _size(len(panels)))


def _size(count: int) -> tuple[float, float]:
    columns, rows = min(count, COLUMNS), -(-count // COLUMNS)
    return (LEFT + RIGHT + columns * PANEL[0] + (columns - 1) * ACROSS, TOP + BOTTOM + rows * PANEL[1] + (rows - 1) * DOWN)


def _figure(panels: tuple[Panel, ...]) -> Figure:
    size = _size(len(panels))
    columns, rows = min(len(panels), COLUMNS), -(-len(panels) // COLUMNS)
    fig = Figure(figsize=size)
    fig.subplots_adjust(**grid(size, left=LEFT, right=RIGHT, top=TOP, bottom=BOTTOM, across=ACROSS, down=DOWN,
                               columns=columns, rows=rows))
    width = 1 / RATE_BINS
    for index, (title, bins, no_drafts) in enumerate(panels):
        ax = fig.add_subplot(rows, columns, index + 1)
        ax.bar([i * width for i in range(RATE_BINS)], bins, width=width, align="edge", color="#4c72b0", edgecolor="white")
        ax.set_xlim(0, 1)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("accepted / draft tokens per request" + (f" ({no_drafts} drafted nothing)" if no_drafts else ""),
                      fontsize=8)
        ax.set_ylabel("requests", fontsize=8)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: no tick at half a request
        ax.tick_params(labelsize=8)
    return fig
