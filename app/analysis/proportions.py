"""Did acceptance change between two builds? Two-proportion tests on vLLM's counters, with a minimum effect.

Pure functions, standard library only: nothing here reads the database, the clock or global state.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.analysis.intervals import Z_95, wilson_interval

# Two acceptance rates closer than this (2 percentage points) are never flagged: with millions of draft
# tokens any difference is significant, and a 0.3-point change is not worth a reviewer's time.
MIN_EFFECT = 0.02
# The level of each test; per-position tests share it (Bonferroni, see ``per_position_changes``).
ALPHA = 0.002


@dataclass(frozen=True)
class ProportionChange:
    """``head - base`` of two rates, its Newcombe 95 % interval, the pooled z test and whether it counts.

    ``flagged`` is True when ``p_value < alpha`` and ``|difference| >= min_effect``; the sign of
    ``difference`` then says which way. ``low <= difference <= high`` always holds.
    """

    base_rate: float
    head_rate: float
    difference: float
    low: float
    high: float
    z: float
    p_value: float
    flagged: bool


def two_proportions(
    base_successes: int,
    base_trials: int,
    head_successes: int,
    head_trials: int,
    *,
    alpha: float = ALPHA,
    min_effect: float = MIN_EFFECT,
) -> ProportionChange:
    """Pooled two-proportion z test of ``p_h = s_h / n_h`` against ``p_b = s_b / n_b``, with Newcombe's interval.

    Test: with the pooled rate ``p = (s_b + s_h) / (n_b + n_h)``,
    ``z = (p_h - p_b) / sqrt(p (1 - p) (1/n_b + 1/n_h))`` and the two-sided
    ``p_value = erfc(|z| / sqrt(2))``; ``z = 0`` and ``p_value = 1`` when ``p`` is 0 or 1 (both
    rates equal). Interval of ``d = p_h - p_b`` (Newcombe's hybrid score, method 10), from the
    Wilson intervals ``[l_b, u_b]`` and ``[l_h, u_h]`` of each rate::

        low  = d - sqrt((p_h - l_h)^2 + (u_b - p_b)^2)
        high = d + sqrt((u_h - p_h)^2 + (p_b - l_b)^2)

    Unlike the Wald interval it stays inside [-1, 1] and has width at rates of 0 or 1.

    Counts of draft tokens are not independent trials (the tokens of one draft, and the drafts of one
    request, share a context), so the test is too confident on its own: the minimum effect is what
    keeps A/A pairs quiet on large samples.

    Raises
    ------
    ValueError
        If a side has no trials or its successes lie outside ``[0, trials]`` (from ``wilson_interval``).

    Notes
    -----
    O(1). Newcombe, R. G. (1998), "Interval estimation for the difference between independent
    proportions: comparison of eleven methods", Statistics in Medicine 17(8).
    """
    base_low, base_high = wilson_interval(base_successes, base_trials, Z_95)
    head_low, head_high = wilson_interval(head_successes, head_trials, Z_95)
    p_base, p_head = base_successes / base_trials, head_successes / head_trials
    difference = p_head - p_base
    pooled = (base_successes + head_successes) / (base_trials + head_trials)
    variance = pooled * (1.0 - pooled) * (1.0 / base_trials + 1.0 / head_trials)
    z = difference / math.sqrt(variance) if variance > 0 else 0.0
    p_value = math.erfc(abs(z) / math.sqrt(2.0))
    return ProportionChange(
        base_rate=p_base,
        head_rate=p_head,
        difference=difference,
        low=difference - math.hypot(p_head - head_low, base_high - p_base),
        high=difference + math.hypot(head_high - p_head, p_base - base_low),
        z=z,
        p_value=p_value,
        flagged=p_value < alpha and abs(difference) >= min_effect,
    )


def per_position_changes(
    base_accepted_per_position: Sequence[int],
    base_drafts: int,
    head_accepted_per_position: Sequence[int],
    head_drafts: int,
    *,
    alpha: float = ALPHA,
    min_effect: float = MIN_EFFECT,
) -> tuple[ProportionChange, ...]:
    """:func:`two_proportions` of ``A_i / D`` at each draft position ``i`` both sides measured.

    ``A_i`` is vLLM's ``num_accepted_tokens_per_pos[i]`` and ``D`` its ``num_drafts``. Each of the ``k``
    positions is tested at ``alpha / k`` (Bonferroni), so a cell is no likelier to be flagged for
    having more positions. Positions beyond the shorter side are left out (a build that drafts
    fewer tokens shows in the overall rate). Empty when either side has no drafts.
    """
    if base_drafts == 0 or head_drafts == 0:
        return ()
    k = min(len(base_accepted_per_position), len(head_accepted_per_position))
    return tuple(
        two_proportions(b, base_drafts, h, head_drafts, alpha=alpha / k, min_effect=min_effect)
        for b, h in zip(base_accepted_per_position[:k], head_accepted_per_position[:k], strict=True)
    )
