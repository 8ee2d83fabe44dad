"""The Mann-Whitney U test between two samples of tokens/s: pure functions, standard library only."""

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

# Largest m x n for which the exact null distribution is counted (a table of m n + 1 entries per cell of
# the recursion); above it the normal approximation is already close.
EXACT_MAX_PAIRS = 400


@dataclass(frozen=True)
class MannWhitney:
    """``u`` counts the pairs where the head beat the base (ties count 1/2); ``p_value`` is two-sided."""

    u: float
    p_value: float
    exact: bool


def mann_whitney(base: Sequence[float], head: Sequence[float]) -> MannWhitney:
    """Two-sided Mann-Whitney U test of ``head`` against ``base``.

    ``U = sum_{i,j} [h_i > b_j] + 1/2 [h_i = b_j]`` over the ``m = len(head)``, ``n = len(base)``
    pairs, so ``U = m n`` when every head value beats every base value.

    - Exact, when there are no ties and ``m n <= EXACT_MAX_PAIRS``: ``P(U <= u)`` from the count of
      arrangements ``f(m, n, u) = f(m - 1, n, u - n) + f(m, n - 1, u)`` over ``C(m + n, m)``, and
      ``p = min(1, 2 P(U <= min(u, m n - u)))``.
    - Otherwise normal, with the tie correction and a continuity correction of 1/2:
      ``sigma^2 = m n / 12 ((N + 1) - sum_t (t^3 - t) / (N (N - 1)))`` for ``N = m + n`` and tie
      groups of size ``t``; ``z = (|U - m n / 2| - 1/2) / sigma`` (0 if negative),
      ``p = erfc(z / sqrt 2)``; ``p = 1`` when every value ties.

    Raises
    ------
    ValueError
        If either sample is empty.

    Notes
    -----
    O(m n) for U, O(m^2 n^2) for the exact table. Mann, H. B. and Whitney, D. R. (1947), "On a test of
    whether one of two random variables is stochastically larger than the other", Ann. Math. Stat. 18.
    """
    if not base or not head:
        raise ValueError(f"both samples need values: base has {len(base)}, head has {len(head)}")
    m, n = len(head), len(base)
    u = sum((h > b) + 0.5 * (h == b) for h in head for b in base)
    ties = [t for t in Counter([*base, *head]).values() if t > 1]
    if not ties and m * n <= EXACT_MAX_PAIRS:
        tail = min(u, m * n - u)
        below = sum(_arrangements(m, n, k) for k in range(int(tail) + 1))
        return MannWhitney(u, min(1.0, 2.0 * below / math.comb(m + n, m)), exact=True)
    total = m + n
    correction = sum(t**3 - t for t in ties) / (total * (total - 1))
    variance = m * n / 12.0 * ((total + 1) - correction)
    if variance <= 0:
        return MannWhitney(u, 1.0, exact=False)
    z = max(0.0, abs(u - m * n / 2.0) - 0.5) / math.sqrt(variance)
    return MannWhitney(u, math.erfc(z / math.sqrt(2.0)), exact=False)


def smallest_p_value(m: int, n: int) -> float:
    """The smallest two-sided p the exact test can give with samples of ``m`` and ``n``: ``2 / C(m + n, m)``.

    Below a level ``alpha`` only when the samples are large enough for the test to ever say "different"
    at that level: 5 against 5 gives 2/252 = 0.0079, so asv's 0.002 needs 7 against 7 (2/3432).
    """
    return min(1.0, 2.0 / math.comb(m + n, m))


@cache
def _arrangements(m: int, n: int, u: int) -> int:
    """How many orderings of ``m`` head and ``n`` base values (no ties) give exactly ``U = u``."""
    if u < 0 or u > m * n:
        return 0
    if m == 0 or n == 0:
        return 1 if u == 0 else 0
    # The largest value is a head value (it beats all n base values) or a base value (it beats none).
    return _arrangements(m - 1, n, u - n) + _arrangements(m, n - 1, u)
