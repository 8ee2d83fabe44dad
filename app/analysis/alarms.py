"""The graph-capture correctness alarm, and acceptance that says nothing (degenerate).

Pure functions, standard library only. At temperature 0 a draft proposes nearly the same tokens
whatever the graph mode (only rounding differs), so its acceptance must not move much between a cell
and its eager sibling (the same cell with graph mode NONE). A captured graph that replays wrongly
shows as a drop against that sibling; so does output that stops matching the baseline.
"""

import math
from dataclasses import dataclass

from app.analysis.intervals import Z_95, wilson_interval
from app.enums import CheckReason

# Two points of acceptance (or of lossless share): rounding between graph modes moves less than that.
MIN_EFFECT = 0.02


@dataclass(frozen=True)
class Difference:
    """``p1 - p2`` with its 95 % interval ``[low, high]``."""

    value: float
    low: float
    high: float


def difference(s1: int, n1: int, s2: int, n2: int, z: float = Z_95) -> Difference:
    """Difference of two independent proportions ``p1 - p2`` (``p = s / n``) with Newcombe's hybrid score interval.

    With Wilson intervals ``[l1, u1]`` and ``[l2, u2]`` (``app.analysis.intervals``) and ``d = p1 - p2``:

    ``low = d - sqrt((p1 - l1)^2 + (u2 - p2)^2)``, ``high = d + sqrt((u1 - p1)^2 + (p2 - l2)^2)``.

    Unlike the Wald interval it has width at 0 and 1, where degenerate drafts sit.

    Raises ValueError when ``n1`` or ``n2`` is below 1, or a count lies outside ``[0, n]``.

    Notes
    -----
    O(1). Newcombe, R. G. (1998), "Interval estimation for the difference between independent
    proportions: comparison of eleven methods", Statistics in Medicine 17(8), method 10.
    """
    l1, u1 = wilson_interval(s1, n1, z)
    l2, u2 = wilson_interval(s2, n2, z)
    p1, p2 = s1 / n1, s2 / n2
    d = p1 - p2
    return Difference(d, d - math.hypot(p1 - l1, u2 - p2), d + math.hypot(u1 - p1, p2 - l2))


def decide(diff: Difference, min_effect: float = MIN_EFFECT) -> CheckReason:
    """The alarm's rule: raised when the interval of the difference excludes 0 and the difference is at least
    ``min_effect``; else within the interval (it holds 0: no change seen) or below the minimum effect (it excludes 0:
    a change smaller than ``min_effect``).

    Both conditions: with a million draft tokens a 0.1-point wobble is "significant" and means nothing, and with a
    hundred a 10-point drop can be chance. Never answers ``CheckReason.UNKNOWN`` (a stored check without its
    difference). O(1).
    """
    if diff.low <= 0 <= diff.high:
        return CheckReason.WITHIN_INTERVAL
    return CheckReason.RAISED if abs(diff.value) >= min_effect else CheckReason.BELOW_MIN_EFFECT


def is_degenerate(accepted: int, draft_tokens: int) -> bool:
    """Acceptance of exactly 0 or exactly 1 over some draft tokens: a random-weight draft (nothing accepted) or a
    draft that is the target itself (everything accepted). It measures the plumbing, not a draft: such a cell
    is marked, never ranked as a good or bad draft."""
    return draft_tokens > 0 and accepted in (0, draft_tokens)
