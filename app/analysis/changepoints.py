"""Steps in a cell's history (one value per build, oldest first), and the regression still open at its end.

Pure functions, standard library only. The fit is asv's: a piecewise-constant curve minimising the
absolute deviations plus a penalty per step, solved exactly by dynamic programming. It needs a few
points on each side of a step; ``steps`` falls back to comparing neighbours' intervals for histories
too short for it (two or three builds, where a pull request's history starts).

A ratio-scaled metric (tokens/s: a slower host or build is slower by a factor, and its noise grows with its
level) is fitted on its logarithm (``relative=True``), so a step is a ratio and one noisy build on a fast
level weighs as much as one on a slow level; acceptance, in points, is fitted as it is.
"""

import heapq
import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# The penalty per step is PENALTY_FACTOR x ln(n) x the noise scale (see ``default_penalty``). Chosen so
# that pure Gaussian noise of 10 to 200 points gives a step in under 1 % of seeded trials
# (tests/analysis/test_changepoints.py), while a shift of 3 noise units is found after 3 points.
PENALTY_FACTOR = 2.5
# The noise scale is never taken below this fraction of the history's level: a run of identical values
# would otherwise make the penalty 0 and every later wiggle a step.
NOISE_FLOOR = 0.005
_MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class Segment:
    """Points ``start`` to ``end - 1`` of the history, whose level is their median."""

    start: int
    end: int
    level: float


@dataclass(frozen=True)
class Regression:
    """The history's last level is worse than an earlier one: since point ``first_bad`` (its first build)."""

    first_bad: int
    before: float
    after: float

    @property
    def change(self) -> float:
        """``after / before - 1``: -0.2 for a cell that lost a fifth of its tokens/s."""
        return self.after / self.before - 1.0


def detect_steps(
    values: Sequence[float], *, penalty: float | None = None, min_size: int = 2, relative: bool = False
) -> tuple[Segment, ...]:
    """The segments of the exact minimiser of ``sum_r sum_{i in r} |y_i - mu_r| + gamma (k - 1)``.

    ``k`` segments of at least ``min_size`` points each (a history shorter than that is one segment),
    ``mu_r`` the median of segment ``r``, and ``gamma = penalty`` (``default_penalty(values, relative)``
    when None). With ``relative``, ``y_i = ln(values_i)`` (``penalty``, when given, is then in units of
    ``ln``). Each segment's level is the median of its values, as they are. A step is kept only when
    it lowers the total absolute deviation by more than ``gamma``; with ``min_size = 2`` a single
    outlying build never makes a step of its own, and a change at the last build waits for a second
    point to confirm it. Ties go to fewer steps.

    Returns
    -------
    tuple of Segment
        Covering ``0 .. n`` in order; empty for an empty history.

    Raises
    ------
    ValueError
        If ``penalty`` is negative or ``min_size`` below 1, or with ``relative`` if a value is not positive.

    Notes
    -----
    O(n^2 log n) time and O(n^2) memory (the cost of every segment, by two heaps per start), for the
    ``n`` values passed: callers pass a window (the last few hundred builds). Friedrich, F. et al.
    (2008), "Complexity penalized M-estimation: fast computation", J. Comput. Graph. Stat. 17(1);
    asv's ``step_detect.solve_potts``.
    """
    if min_size < 1:
        raise ValueError(f"min_size must be at least 1, got {min_size}")
    gamma = default_penalty(values, relative=relative) if penalty is None else penalty
    if gamma < 0:
        raise ValueError(f"penalty must be non-negative, got {gamma}")
    fitted = _logs(values) if relative else list(values)
    n = len(values)
    if n == 0:
        return ()
    if n < 2 * min_size:
        # No room for two segments.
        return (Segment(0, n, statistics.median(values)),)
    cost = [_costs_from(fitted, start) for start in range(n)]
    # best[j]: the least cost of the first j points; previous[j]: where its last segment starts.
    best, previous = [0.0] + [math.inf] * n, [0] * (n + 1)
    for end in range(min_size, n + 1):
        for start in range(end - min_size + 1):
            if best[start] == math.inf:  # no split of the first ``start`` points has long enough segments
                continue
            total = best[start] + cost[start][end - start - 1] + (gamma if start else 0.0)
            if total < best[end]:
                best[end], previous[end] = total, start
    segments, end = [], n
    while end > 0:
        start = previous[end]
        segments.append(Segment(start, end, statistics.median(values[start:end])))
        end = start
    return tuple(reversed(segments))


@dataclass(frozen=True)
class Point:
    """One run of a cell, in run order: its value and 95 % interval (``low``/``high`` None without one)."""

    value: float
    low: float | None
    high: float | None


def steps(points: Sequence[Point], min_relative: float, *, min_size: int = 2, relative: bool = False) -> list[int]:
    """Indexes ``i`` (1 or more) where the history steps: the starts of :func:`detect_steps`'s segments
    (with ``relative`` as there) when there are at least ``2 * min_size`` points, else :func:`interval_steps`."""
    if len(points) >= 2 * min_size:
        fit = detect_steps([p.value for p in points], min_size=min_size, relative=relative)
        return [segment.start for segment in fit[1:]]
    return interval_steps(points, min_relative)


def interval_steps(points: Sequence[Point], min_relative: float) -> list[int]:
    """Indexes ``i`` (1 or more) where point ``i`` moved against point ``i - 1``.

    A step whose intervals do not overlap (``low_i > high_{i-1}`` or ``high_i < low_{i-1}``) and
    whose size is at least ``min_relative`` of the earlier value (``|v_i - v_{i-1}| >= min_relative
    |v_{i-1}|``). A point without an interval is never one, nor is its successor: without spread no
    step can be told from noise. Neighbours only, so a slow drift is not flagged. O(n).
    """
    found = []
    for i in range(1, len(points)):
        before, after = points[i - 1], points[i]
        if None in (before.low, before.high, after.low, after.high):
            continue
        apart = after.low > before.high or after.high < before.low  # type: ignore[operator]
        if apart and abs(after.value - before.value) >= min_relative * abs(before.value):
            found.append(i)
    return found


def default_penalty(values: Sequence[float], *, relative: bool = False) -> float:
    """``gamma = PENALTY_FACTOR * ln(n) * sigma``, the penalty per step.

    ``sigma`` is the noise scale from successive differences, which a step touches only once:
    ``1.4826 * median(|y_{i+1} - y_i|) / sqrt(2)``, and at least ``NOISE_FLOOR`` times the median
    level. With ``relative``, ``y = ln(values)`` and the floor is ``NOISE_FLOOR`` itself (a relative
    spread of that size). A step of size ``delta`` lasting ``m`` points saves about ``m delta`` of absolute
    deviation, so it is found once ``m delta > gamma``: the ``ln(n)`` grows the bar with the
    number of places a spurious step could go (Schwarz's criterion, as in Yao, Y.-C. (1988),
    "Estimating the number of change-points via Schwarz' criterion", Stat. Probab. Lett. 6).
    0 for fewer than 2 values.
    """
    n = len(values)
    if n < 2:
        return 0.0
    fitted = _logs(values) if relative else values
    floor = NOISE_FLOOR if relative else NOISE_FLOOR * abs(statistics.median(values))
    jumps = statistics.median(abs(b - a) for a, b in itertools.pairwise(fitted))
    sigma = max(_MAD_TO_SD * jumps / math.sqrt(2.0), floor)
    return PENALTY_FACTOR * math.log(n) * sigma


def open_regression(
    values: Sequence[float], *, higher_is_better: bool = True, penalty: float | None = None, min_change: float = 0.0,
    relative: bool = False,
) -> Regression | None:
    """The regression still open at the end of a history, or None.

    From :func:`detect_steps` (with ``relative`` as there): the last segment's level is worse than the
    best level before it (the latest segment at that best level when several share it) by more than
    ``min_change`` (relative). ``first_bad`` is the first point after that best segment: the first build of the
    drop, even when the level fell in several steps since. Tokens/s and acceptance are higher-is-better.

    Raises
    ------
    ValueError
        From :func:`detect_steps`, or if the best level is 0 (no relative change to speak of).
    """
    segments = detect_steps(values, penalty=penalty, relative=relative)
    if len(segments) < 2:
        return None
    sign = 1.0 if higher_is_better else -1.0
    earlier = segments[:-1]
    top = max(sign * s.level for s in earlier)
    best = [s for s in earlier if sign * s.level == top][-1]
    last = segments[-1]
    if best.level == 0:
        raise ValueError("the best level is 0: a relative change is undefined")
    if sign * (last.level - best.level) / abs(best.level) >= -min_change:
        return None
    return Regression(first_bad=best.end, before=best.level, after=last.level)


def _logs(values: Sequence[float]) -> list[float]:
    if any(v <= 0 for v in values):
        raise ValueError("a relative fit needs positive values")
    return [math.log(v) for v in values]


def _costs_from(values: Sequence[float], start: int) -> list[float]:
    """``sum |y_i - median|`` of ``values[start:end]`` for every ``end``, by a max-heap of the lower half and a
    min-heap of the upper half with their sums (the median is the lower half's top)."""
    low: list[float] = []  # negated
    high: list[float] = []
    low_sum = high_sum = 0.0
    costs = []
    for value in values[start:]:
        if low and value > -low[0]:
            heapq.heappush(high, value)
            high_sum += value
        else:
            heapq.heappush(low, -value)
            low_sum += value
        if len(low) > len(high) + 1:
            moved = -heapq.heappop(low)
            low_sum -= moved
            heapq.heappush(high, moved)
            high_sum += moved
        elif len(high) > len(low):
            moved = heapq.heappop(high)
            high_sum -= moved
            heapq.heappush(low, -moved)
            low_sum += moved
        median = -low[0]
        costs.append((median * len(low) - low_sum) + (high_sum - median * len(high)))
    return costs
