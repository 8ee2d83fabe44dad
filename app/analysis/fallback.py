"""What an eager fallback costs: a cell's throughput over its repeats, and the ratio of two cells' with an interval.

Pure functions, standard library only. A result keeps the median of its rounds and that median's interval:
the rounds' order statistics (``app.analysis.rounds``), or a block bootstrap over their passes
(``app.analysis.passes``) with its level stored beside it; these functions read nothing else, so a page over
thousands of results never opens their per-round data.
"""

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from app.analysis.intervals import Z_95
from app.analysis.rounds import interval_rank


@dataclass(frozen=True)
class RepeatSpeed:
    """One repeat (engine start) of a cell: the median tokens/s of its ``rounds`` and that median's interval, at
    ``level`` (None: the order-statistic interval of ``rounds`` rounds, at the level they allow)."""

    median: float
    low: float | None
    high: float | None
    rounds: int
    level: float | None = None


@dataclass(frozen=True)
class CellSpeed:
    """A cell's tokens/s over its repeats: the median of the repeats' medians, and the standard error of its
    logarithm (None when no repeat has an interval and there is only one repeat)."""

    median: float
    se_log: float | None
    repeats: int
    rounds: int


@dataclass(frozen=True)
class Ratio:
    """``value`` = a / b with a 95 % interval ``[low, high]`` (None when either side has no spread to go on)."""

    value: float
    low: float | None
    high: float | None


def repeat_level(repeat: RepeatSpeed) -> float | None:
    """The confidence ``C`` of a repeat's interval: its stored ``level`` (a block bootstrap over passes: 0.95), else
    what ``rounds`` rounds' order-statistic interval holds (``interval_rank``: 0.9375 for 5). None without an
    interval. The one answer to "at what level is this start's interval", for the results API and the pages. O(n)."""
    if repeat.low is None or repeat.high is None:
        return None
    if repeat.level is not None:
        return repeat.level
    rank = interval_rank(repeat.rounds)
    return None if rank is None else rank[1]


def repeat_se_log(repeat: RepeatSpeed) -> float | None:
    """Standard error of ``ln median`` read off the repeat's interval.

    The interval holds the median with probability ``C`` (``repeat_level``); taken as a normal interval on the
    log scale, ``se = (ln high - ln low) / (2 z)`` with ``z = Phi^-1((1 + C) / 2)``. Five rounds give the range
    at ``C = 0.9375``, so ``z = 1.863``; a bootstrap over passes is at 0.95, ``z = 1.96``. None without an
    interval, or with a bound that is not positive.

    Notes
    -----
    O(n). Altman, D. G. and Bland, J. M. (2011), "How to obtain the P value from a confidence
    interval", BMJ 343:d2304 (reading a standard error back from an interval).
    """
    z = _interval_z(repeat)
    return None if z is None else (math.log(repeat.high) - math.log(repeat.low)) / (2 * z)  # type: ignore[arg-type]


def repeat_interval(repeat: RepeatSpeed, z: float = Z_95) -> tuple[float, float] | None:
    """One engine start's interval at the level of ``z`` (95 % by default), read off its own interval side by side:
    with ``C`` its level (``repeat_level``) and ``z_C = Phi^-1((1 + C) / 2)``,

    ``low' = m (low / m)^(z / z_C)``, ``high' = m (high / m)^(z / z_C)``.

    Five rounds give the range at 93.75 %, so each side grows by ``1.96 / 1.863 = 1.052`` on the log scale; a
    bootstrap over passes, at 95 % already, is kept as it is. Kept
    per side because rounds are skewed (a slow first round): a symmetric interval around the median
    (``repeat_se_log``, what ``ratio`` needs) then reaches far above the fastest round. None without an
    interval, with a bound that is not positive, or with an end no float holds (``scaled_ends``). O(n).
    """
    own = _interval_z(repeat)
    if own is None:
        return None
    scale = z / own
    m = repeat.median
    return scaled_ends(m, scale * (math.log(repeat.low) - math.log(m)), scale * (math.log(repeat.high) - math.log(m)))  # type: ignore[arg-type]


def _interval_z(repeat: RepeatSpeed) -> float | None:
    """``z_C = Phi^-1((1 + C) / 2)`` of the repeat's interval (``C`` from ``repeat_level``); None without an
    interval or with a bound that is not positive."""
    if repeat.low is None or repeat.high is None or repeat.low <= 0 or repeat.high <= 0:
        return None
    return _rounds_z(repeat.rounds) if repeat.level is None else _level_z(repeat.level)


@cache
def _rounds_z(rounds: int) -> float | None:
    """``z_C = Phi^-1((1 + C) / 2)`` of the order-statistic interval of ``rounds`` rounds; None when it has none.

    Kept per round count (a few distinct ones): a page pools thousands of repeats, and the level's search
    (``interval_rank``, O(n) binomial sums) and the normal quantile cost /fallback most of its CPU when
    recomputed per repeat.
    """
    rank = interval_rank(rounds)
    return None if rank is None else _level_z(rank[1])


@cache
def _level_z(level: float) -> float:
    """``Phi^-1((1 + level) / 2)``, kept per level (a few distinct ones) as ``_rounds_z`` is."""
    return statistics.NormalDist().inv_cdf((1 + level) / 2)


def pool_repeats(repeats: Sequence[RepeatSpeed]) -> CellSpeed:
    """A cell's speed from its ``k`` repeats.

    The point is the median of the repeats' medians. The standard error of its logarithm is the larger
    of (a) the within-engine spread, ``sqrt(sum_i se_i^2) / k`` over the repeats that have an interval
    (``repeat_se_log``), and (b) the between-start spread, ``sd(ln m_i) / sqrt(k)`` (two or more
    repeats): a repeat is a fresh engine start, and starts differ more than rounds of one start, so
    (a) alone is too narrow; with few repeats (b) alone can be too.

    Raises ValueError on no repeats or a median that is not positive. O(k).
    """
    if not repeats:
        raise ValueError("no repeats")
    if any(r.median <= 0 for r in repeats):
        raise ValueError("a repeat's median tokens/s must be positive")
    k = len(repeats)
    within = [se for se in map(repeat_se_log, repeats) if se is not None]
    candidates = []
    if within:
        candidates.append(math.sqrt(sum(se * se for se in within)) / len(within))
    if k >= 2:
        logs = [math.log(r.median) for r in repeats]
        mean = sum(logs) / k
        # The sample standard deviation by its formula: statistics.stdev's exact fractions cost a page 30 ms.
        sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (k - 1))
        candidates.append(sd / math.sqrt(k))
    return CellSpeed(
        median=statistics.median(r.median for r in repeats),
        se_log=max(candidates) if candidates else None,
        repeats=k,
        rounds=sum(r.rounds for r in repeats),
    )


def ratio(a: CellSpeed, b: CellSpeed, z: float = Z_95) -> Ratio:
    """``a / b`` with the interval ``exp(ln(a / b) +- z sqrt(se_a^2 + se_b^2))`` (the two cells ran apart, so
    their errors add on the log scale). The interval is None when either side has no ``se_log``.

    ``0.65x [0.61, 0.69]``: the cell ran at 65 % of the reference, and 61-69 % is what its spread allows.
    O(1).
    """
    value = a.median / b.median
    if a.se_log is None or b.se_log is None:
        return Ratio(value, None, None)
    half = z * math.hypot(a.se_log, b.se_log)
    return Ratio(value, *(scaled_ends(value, -half, half) or (None, None)))


def scaled_ends(value: float, down: float, up: float) -> tuple[float, float] | None:
    """``(value exp(down), value exp(up))``, an interval's ends on the log scale; None when a float cannot hold
    one (stored speeds of 1e300 and 1e-300 spread that far): no interval, never an error or an infinite end. O(1)."""
    try:
        ends = value * math.exp(down), value * math.exp(up)
    except OverflowError:
        return None
    return ends if all(math.isfinite(end) for end in ends) else None
