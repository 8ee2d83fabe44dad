"""Confidence intervals for proportions and ratios: pure functions, standard library only.

Public functions first, helpers last. Nothing here reads the database, the clock or global state:
the bootstrap draws from its own ``random.Random(seed)``.
"""

import math
import random
from collections.abc import Sequence

Z_95 = 1.959963984540054  # the 0.975 quantile of the standard normal


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    With :math:`\\hat p = s / n`,

    .. math::

        \\text{centre} = \\frac{\\hat p + z^2 / (2n)}{1 + z^2 / n}, \\qquad
        \\text{half} = \\frac{z}{1 + z^2 / n} \\sqrt{\\frac{\\hat p (1 - \\hat p)}{n} + \\frac{z^2}{4 n^2}}

    and the interval is ``(centre - half, centre + half)``, clipped to ``[0, 1]`` against rounding.
    Unlike the normal (Wald) interval it has non-zero width at ``s = 0`` and ``s = n``.

    Parameters
    ----------
    successes : int
        :math:`s`, with ``0 <= s <= n``.
    trials : int
        :math:`n`, at least 1.
    z : float
        Standard-normal quantile; the default gives a two-sided 95 % interval.

    Returns
    -------
    (low, high) : tuple of float

    Raises
    ------
    ValueError
        If ``trials < 1`` (no trials says nothing: the caller decides what to show) or
        ``successes`` lies outside ``[0, trials]``.

    Notes
    -----
    O(1). Wilson, E. B. (1927), "Probable inference, the law of succession, and statistical
    inference", JASA 22(158).
    """
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must lie in [0, {trials}], got {successes}")
    n = trials
    p = successes / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_ratio_interval(
    numerators: Sequence[float],
    denominators: Sequence[float],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval for a ratio of sums, resampling units (requests) whole.

    Each resample draws ``n`` indices :math:`i_1..i_n` uniformly with replacement from the ``n``
    units and computes

    .. math::

        R^* = \\frac{\\sum_k x_{i_k}}{\\sum_k y_{i_k}}

    The interval is the :math:`\\alpha/2` and :math:`1 - \\alpha/2` quantiles (linear
    interpolation between order statistics) of the :math:`R^*`, with
    :math:`\\alpha = 1 - \\text{confidence}`. Resamples whose denominator sums to zero have no
    ratio and are left out.

    Because the percentile interval commutes with increasing maps, an interval for
    :math:`f(R)` with ``f`` increasing is ``(f(low), f(high))``: e.g. mean acceptance length
    ``1 + R`` needs no statistic of its own.

    Parameters
    ----------
    numerators, denominators : sequence of float
        :math:`x_i` and :math:`y_i` of unit ``i``, same non-zero length, ``sum(denominators) != 0``.
    resamples : int
        :math:`B`, at least 1.
    confidence : float
        In ``(0, 1)``.
    seed : int
        Seed of the private ``random.Random``: equal inputs and seed give equal intervals.

    Returns
    -------
    (low, high) : tuple of float

    Raises
    ------
    ValueError
        On unequal or empty inputs, a zero denominator total, ``resamples < 1``, a confidence
        outside ``(0, 1)``, or when no resample has a non-zero denominator.

    Notes
    -----
    O(B n) time, O(B + n) memory. Efron, B. & Tibshirani, R. (1993), *An Introduction to the
    Bootstrap*, ch. 13.
    """
    n = len(numerators)
    if n != len(denominators):
        raise ValueError(f"{n} numerators but {len(denominators)} denominators")
    if n == 0:
        raise ValueError("no units to resample")
    if sum(denominators) == 0:
        raise ValueError("denominators sum to zero: the ratio is undefined")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")

    rng = random.Random(seed)
    units = range(n)
    ratios = []
    for _ in range(resamples):
        picks = rng.choices(units, k=n)
        denominator = sum(denominators[i] for i in picks)
        if denominator != 0:
            ratios.append(sum(numerators[i] for i in picks) / denominator)
    if not ratios:
        raise ValueError("every resample drew only zero denominators")
    ratios.sort()
    alpha = 1.0 - confidence
    return _quantile(ratios, alpha / 2), _quantile(ratios, 1.0 - alpha / 2)


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Quantile ``q`` of sorted, non-empty ``ordered``: linear interpolation at position ``q (m - 1)``.

    (Hyndman & Fan type 7, numpy's default.) O(1).
    """
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (position - below) * (ordered[above] - ordered[below])
