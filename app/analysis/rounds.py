"""Throughput over a cell's measured rounds: the median and a distribution-free interval for it.

Pure functions, standard library only. A round is one window of the workload inside one engine
start; rounds of one cell share the engine, so their spread is the within-engine noise, not the
noise between engine starts (repeats).
"""

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class MedianInterval:
    """The median of ``n`` values and an interval ``[low, high]`` holding the population median with at least
    ``confidence`` (exactly, for any continuous distribution); ``low``/``high`` are None when ``n`` is too
    small for the confidence asked."""

    median: float
    low: float | None
    high: float | None
    confidence: float | None
    n: int


def median_interval(values: Sequence[float], confidence: float = 0.95) -> MedianInterval:
    """Order-statistic interval for the median (sign-test inversion).

    With the values sorted, :math:`x_{(1)} \\le \\dots \\le x_{(n)}`, the interval
    :math:`[x_{(k)}, x_{(n+1-k)}]` covers the population median with probability

    .. math::

        C(k) = 1 - 2 \\sum_{i=0}^{k-1} \\binom{n}{i} 2^{-n}

    for any continuous distribution. ``k`` is the largest with ``C(k) >= confidence``. For ``n = 5``
    the widest interval, ``[x_(1), x_(5)]``, has ``C = 0.9375``: below 0.95, so five rounds give the
    min-max range at 93.75 %, reported as such (``confidence`` is the achieved level, not the asked).
    Fewer than 2 values have no interval.

    Parameters
    ----------
    values : sequence of float
        At least one.
    confidence : float
        Wanted coverage in (0, 1); the best achievable below it is used when ``n`` is small
        (never below 0.5), and the achieved level is returned.

    Returns
    -------
    MedianInterval

    Raises
    ------
    ValueError
        If ``values`` is empty or ``confidence`` is not in (0, 1).

    Notes
    -----
    O(n log n). Conover, W. J. (1999), *Practical Nonparametric Statistics*, 3rd ed., sec. 3.2.
    """
    if not values:
        raise ValueError("no values")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    ordered = sorted(values)
    n = len(ordered)
    median = statistics.median(ordered)
    rank = interval_rank(n, confidence)
    if rank is None:
        return MedianInterval(median, None, None, None, n)
    k, achieved = rank
    return MedianInterval(median, ordered[k - 1], ordered[n - k], achieved, n)


def interval_rank(n: int, confidence: float = 0.95) -> tuple[int, float] | None:
    """``(k, C(k))`` for :func:`median_interval` over ``n`` values: the largest ``k`` with ``C(k) >= confidence``,
    else the widest interval (``k = 1``) at what it achieves; None below 2 values or when that is under 0.5.

    Also tells what level a stored interval of ``n`` rounds holds (results keep ``rounds``, not the level).
    O(n).
    """
    if n < 2:
        return None
    best: tuple[int, float] | None = None
    for k in range(1, n // 2 + 1):
        achieved = coverage(n, k)
        if achieved >= confidence:
            best = (k, achieved)
        elif best is None:
            # Even the widest interval misses the asked level: report the widest, at what it achieves.
            best = (k, achieved)
            break
        else:
            break
    if best is None or best[1] < 0.5:
        return None
    return best


def coverage(n: int, k: int) -> float:
    """:math:`C(k)`: the probability that ``[x_(k), x_(n+1-k)]`` holds the median of ``n`` draws. O(k)."""
    if not 1 <= k <= (n + 1) // 2:
        raise ValueError(f"k must lie in [1, {(n + 1) // 2}], got {k}")
    tail = sum(math.comb(n, i) for i in range(k)) / 2**n
    return 1.0 - 2.0 * tail


def efficiency(measured_s: float, wall_s: float) -> float | None:
    """Seconds inside measured rounds over the cell's wall time (engine start, warm-up and shutdown
    included): how much of a cell's cost measured something. None without a wall time."""
    if wall_s <= 0:
        return None
    return min(1.0, measured_s / wall_s)

