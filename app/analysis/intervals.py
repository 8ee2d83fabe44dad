"""Confidence intervals for proportions: pure functions, standard library only.

Nothing here reads the database, the clock or global state.
"""

import math

Z_95 = 1.959963984540054  # the 0.975 quantile of the standard normal


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    With :math:`\\hat p = s / n`,

    .. math::

        \\text{centre} = \\frac{\\hat p + z^2 / (2n)}{1 + z^2 / n}, \\qquad
        \\text{half} = \\frac{z}{1 + z^2 / n} \\sqrt{\\frac{\\hat p (1 - \\hat p)}{n} + \\frac{z^2}{4 n^2}}

    and the interval is ``(centre - half, centre + half)``, clipped to ``[0, 1]``. It always holds
    :math:`\\hat p` (exactly: at ``s = 0`` rounding left ``centre - half`` at 3e-17, so the bounds
    are also held to :math:`\\hat p`). Unlike the normal (Wald) interval it has non-zero width at
    ``s = 0`` and ``s = n``.

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
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))
