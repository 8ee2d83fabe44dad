"""Change points in a cell's history across builds: where a value moved beyond both points' intervals.

Pure functions, standard library only. (The pull-request work brings a fuller detector in
``app.analysis.verdicts``; this is the signature the history view needs, to be reconciled with it.)
"""

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    """One run of the cell, in run order: its value and 95 % interval (``low``/``high`` None without one)."""

    value: float
    low: float | None
    high: float | None


def change_points(points: Sequence[Point], min_relative: float) -> list[int]:
    """Indexes ``i`` (1 or more) where point ``i`` moved against point ``i - 1``.

    A change point is a step whose intervals do not overlap (``low_i > high_{i-1}`` or
    ``high_i < low_{i-1}``) and whose size is at least ``min_relative`` of the earlier value
    (``|v_i - v_{i-1}| >= min_relative |v_{i-1}|``). A point without an interval is never one, nor is its
    successor: without spread no step can be told from noise. Compared with its neighbour only, so a slow
    drift over many builds is not flagged (the history's plot shows it).

    Does not sort: ``points`` must be in run order. O(n).
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
