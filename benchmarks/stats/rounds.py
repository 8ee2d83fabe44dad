"""Whether engine starts differ by more than their rounds: the A/A check of ``h200_report`` and ``verdict_aa``.

Pure functions over the intervals of :mod:`app.analysis.rounds`. The service never runs this check:
it is how the research asks whether one start's interval also holds the next start's median
(docs/h200-report.md; tests/data/aa-cpu).
"""

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from app.analysis.rounds import interval_rank, median_interval


def inside_probability(n: int, m: int, confidence: float = 0.95) -> float:
    """The chance that the median of ``m`` rounds of another engine start lies inside the interval
    :func:`median_interval` gives ``n`` rounds, when starts do not differ (all ``n + m`` rounds
    exchangeable): what an A/A check of two starts should find if a start's interval were also an
    interval for the next start.

    With ``[x_(k), x_(n+1-k)]`` the interval (``k`` from :func:`interval_rank`) and the other start's median
    its ``j``-th of ``m`` values, ``j = (m + 1) / 2``, the median lies inside when at least ``k`` of the ``n``
    values fall below it and at least ``k`` above. Every interleaving of the two samples being equally
    likely, with ``t`` of the ``n`` values below the median,

    .. math::

        P = \\sum_{t=k}^{n-k} \\binom{t + j - 1}{t} \\binom{n - t + m - j}{n - t} \\Big/ \\binom{n + m}{n}

    for any continuous distribution. Five rounds against five: ``210 / 252 = 5/6``, not the interval's
    93.75 %, because the other median has its own noise.

    Raises ValueError when ``n`` has no interval (fewer than 2 rounds) or ``m`` is even (the median of an
    even count is a mean of two values, and the chance then depends on the distribution). O(n).
    """
    rank = interval_rank(n, confidence)
    if rank is None:
        raise ValueError(f"{n} rounds have no interval")
    if m < 1 or m % 2 == 0:
        raise ValueError(f"the other start needs an odd number of rounds, got {m}")
    k, j = rank[0], (m + 1) // 2
    ways = sum(math.comb(t + j - 1, t) * math.comb(n - t + m - j, n - t) for t in range(k, n - k + 1))
    return ways / math.comb(n + m, n)


@dataclass(frozen=True)
class StartsCheck:
    """The A/A check over engine starts of the same cells (:func:`aa_check`)."""

    hits: int  # ordered pairs of starts of one cell where the second's median lies in the first's interval
    pairs: int
    expected: float  # the hits to expect if starts did not differ (:func:`inside_probability`)
    p_value: float  # the chance of this few hits or fewer if starts did not differ


def aa_check(cells: Sequence[Sequence[Sequence[float]]], *, permutations: int = 10_000, seed: int = 0) -> StartsCheck:
    """Whether a start's interval holds the other starts' medians as often as it would if starts did not differ.

    ``cells`` holds, per cell, each engine start's rounds (tokens/s). Over every ordered pair ``(a, b)`` of
    starts of a cell, a hit is ``b``'s median inside ``a``'s :func:`median_interval`. The pairs share starts,
    so they are not independent: the p-value is a permutation test, the rounds of each cell shuffled among
    its starts (start sizes kept) ``permutations`` times, ``p = (1 + #{shuffled hits <= hits}) / (1 +
    permutations)``. A small p says starts differ by more than their rounds: one start's interval is then
    too narrow for the next start.

    Only starts of an odd number of rounds, two or more, and cells of two or more such starts count
    (:func:`inside_probability`). Raises ValueError when no cell has two. O(permutations * sum(r log r)).

    Notes
    -----
    Good, P. (2005), *Permutation, Parametric and Bootstrap Tests of Hypotheses*, 3rd ed., ch. 3.
    """
    usable = [[list(s) for s in starts if len(s) >= 2 and len(s) % 2] for starts in cells]
    usable = [starts for starts in usable if len(starts) >= 2]
    if not usable:
        raise ValueError("no cell has two engine starts of an odd number of rounds")

    def count(starts: list[list[float]]) -> int:
        found = [median_interval(s) for s in starts]
        return sum(a.low <= b.median <= a.high for a in found for b in found if a is not b)  # type: ignore[operator]

    hits = sum(count(starts) for starts in usable)
    pairs = sum(len(starts) * (len(starts) - 1) for starts in usable)
    expected = sum(inside_probability(len(a), len(b)) for starts in usable for a in starts for b in starts if a is not b)
    rng, as_few = random.Random(seed), 0
    for _ in range(permutations):
        shuffled = 0
        for starts in usable:
            pool = [value for start in starts for value in start]
            rng.shuffle(pool)
            cuts = list(itertools.accumulate(len(start) for start in starts))
            shuffled += count([pool[end - len(start):end] for start, end in zip(starts, cuts, strict=True)])
        as_few += shuffled <= hits
    return StartsCheck(hits, pairs, expected, (1 + as_few) / (1 + permutations))
