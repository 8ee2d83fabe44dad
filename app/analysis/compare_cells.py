"""One cell's verdict between a base run and a head run: the rule behind the compare view and the CI comment.

Pure: reads ``app.enums`` only. (The pull-request work brings its own tests in ``app.analysis.verdicts``;
this is the signature the compare view needs, to be reconciled with it.)
"""

from dataclasses import dataclass

from app.analysis.alarms import MIN_EFFECT, Difference, shifted
from app.analysis.fallback import Ratio
from app.enums import Verdict

# Five per cent of tokens/s: less is within what engine starts of one build differ by on the H200.
MIN_SPEED_CHANGE = 0.05

# Worst first: the order of the compare table.
SEVERITY = {verdict: rank for rank, verdict in enumerate(Verdict)}


@dataclass(frozen=True)
class Side:
    """A cell in one run: whether any repeat ran (else every one died) and whether vLLM downgraded its graph mode."""

    ran: bool
    downgraded: bool


def verdict(
    base: Side,
    head: Side,
    *,
    speed: Ratio | None,
    acceptance: Difference | None,
    min_speed_change: float = MIN_SPEED_CHANGE,
    min_effect: float = MIN_EFFECT,
) -> Verdict:
    """The first that holds, in this order:

    1. ``newly_crashing``: the base ran, the head did not; ``fixed``: the other way round;
    2. ``now_downgraded``: the head was downgraded and the base was not;
    3. ``worse``: head / base tokens/s (``speed``) has its whole interval below ``1 - min_speed_change``,
       or acceptance head - base (``acceptance``) dropped by the alarm's rule (``alarms.shifted``);
    4. ``better``: the mirror image (above ``1 + min_speed_change``, or acceptance rose);
    5. ``unchanged``, which includes a speed ratio without an interval (one round, one repeat): a
       single number cannot tell a change from noise.

    A worse metric beats a better one (a faster cell that accepts less is worse). Both sides
    crashed is ``unchanged`` (the crash view tells whether the cause moved). O(1).
    """
    if base.ran and not head.ran:
        return Verdict.NEWLY_CRASHING
    if head.ran and not base.ran:
        return Verdict.FIXED
    if not head.ran:
        return Verdict.UNCHANGED
    if head.downgraded and not base.downgraded:
        return Verdict.NOW_DOWNGRADED
    slower = speed is not None and speed.high is not None and speed.high < 1 - min_speed_change
    faster = speed is not None and speed.low is not None and speed.low > 1 + min_speed_change
    moved = acceptance is not None and shifted(acceptance, min_effect)
    if slower or (moved and acceptance.value < 0):  # type: ignore[union-attr]
        return Verdict.WORSE
    if faster or (moved and acceptance.value > 0):  # type: ignore[union-attr]
        return Verdict.BETTER
    return Verdict.UNCHANGED
