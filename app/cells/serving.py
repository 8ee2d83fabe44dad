"""A serving cell's figures over its engine starts: the latencies its clients saw and the requests that failed.

Each engine start (a job) stores what ``runners/serving.py`` measured (``app.schemas.cell.Serving``): TTFT, TPOT
and ITL percentiles over that start's measured requests, and how many of them completed, failed and came back
empty (tokens that decoded to no text: completed work; before cell schema 5 the runner counted them failed). The
requests themselves are not kept, so starts cannot be pooled request by request: a cell's percentile is the
median of its starts' values, with the order-statistic interval of that median
(``app.analysis.rounds.median_interval``), which holds at its achieved level: 50 % for 2 starts, 75 % for 3,
93.75 % for 5, none for one start (its value alone). Failed requests are summed over the starts.
"""

from dataclasses import dataclass

from pydantic import ValidationError

from app.analysis.intervals import wilson_interval
from app.analysis.proportions import ProportionChange, two_proportions
from app.analysis.rounds import MedianInterval, median_interval
from app.cells.pooling import PooledCell
from app.schemas.cell import Serving

# What the serving page shows of ``Serving``: (its field, the percentile), by the name the page gives it.
LATENCIES = {
    "ttft_p50": ("ttft_ms", "p50"), "ttft_p99": ("ttft_ms", "p99"),
    "tpot_p50": ("tpot_ms", "p50"), "tpot_p99": ("tpot_ms", "p99"),
    "itl_p50": ("itl_ms", "p50"), "itl_p99": ("itl_ms", "p99"),
}


@dataclass(frozen=True)
class ServingFigures:
    """One cell's serving figures: ``latency`` by ``LATENCIES``' names (None where no start reported that
    percentile), the requests summed over its ``starts``; ``unreadable`` stored figures left out."""

    starts: int
    latency: dict[str, MedianInterval | None]
    completed: int
    failed: int
    unreadable: int = 0
    # Completed requests that streamed tokens but no text, summed; None when a start's runner did not count them
    # (cell schema before 5: it counted them as failed).
    empty: int | None = None

    @property
    def sent(self) -> int:
        return self.completed + self.failed

    @property
    def failed_share(self) -> tuple[float, float, float] | None:
        """``failed / sent`` with Wilson's 95 % interval, which takes the requests as independent trials; None
        when nothing was sent. Requests of one engine start share its server, so failures come in runs and the
        interval is narrower than the spread between starts would be."""
        if self.sent == 0:
            return None
        return (self.failed / self.sent, *wilson_interval(self.failed, self.sent))


def figures(cell: PooledCell) -> ServingFigures | None:
    """``cell``'s serving figures over its engine starts (``cell.serving``); None when no start stored any."""
    starts: list[Serving] = []
    unreadable = 0
    for stored in cell.serving:
        try:
            starts.append(Serving.model_validate(stored))
        except ValidationError:
            unreadable += 1
    if not starts:
        return None
    latency = {}
    for name, (field, percentile) in LATENCIES.items():
        values = [value for start in starts if (value := getattr(getattr(start, field), percentile)) is not None]
        latency[name] = median_interval(values) if values else None
    empty = None if any(s.empty is None for s in starts) else sum(s.empty for s in starts)
    return ServingFigures(len(starts), latency, sum(s.completed for s in starts), sum(s.failed for s in starts), unreadable,
                          empty)


def failed_against(cell: ServingFigures, baseline: ServingFigures) -> ProportionChange | None:
    """The cell's failed share minus its baseline's (``two_proportions``: Newcombe's interval, flagged at its
    level and minimum effect); None when either sent nothing. Tokens/s counts completed requests only, so a
    flagged difference means a speedup compares unequal work."""
    if cell.sent == 0 or baseline.sent == 0:
        return None
    return two_proportions(baseline.failed, baseline.sent, cell.failed, cell.sent)
