"""One cell's verdict between a base run and a head run: the compare table's kinds over ``app.analysis.verdicts``.

Pure: reads ``app.enums`` and ``app.analysis.verdicts``. What ran decides first (crashes, then what vLLM
ran instead of what was asked); the numbers are ``verdicts.cell_verdict``'s, the one rule for them.
"""

from dataclasses import dataclass

from app.analysis import verdicts
from app.enums import Verdict

# Worst first: the order of the compare table and of the CI comment.
SEVERITY = {verdict: rank for rank, verdict in enumerate(Verdict)}

_BY_CHANGE = {
    verdicts.Change.WORSE: Verdict.WORSE,
    verdicts.Change.UNDECIDED: Verdict.UNDECIDED,
    verdicts.Change.UNCHANGED: Verdict.UNCHANGED,
    verdicts.Change.BETTER: Verdict.BETTER,
}


@dataclass(frozen=True)
class Side:
    """A cell in one run: whether any repeat ran, whether any died (crashed or timed out), whether vLLM downgraded
    its graph mode, and whether the draft ran eagerly beside a graphed target. Neither ran nor died: nothing has
    finished yet (queued, running, or cancelled before it ran)."""

    ran: bool
    downgraded: bool
    draft_eager: bool = False
    died: bool = False


def verdict(base: Side, head: Side, numbers: verdicts.Verdict | None) -> Verdict:
    """The first that holds, in this order:

    1. ``pending``: a side has neither run nor died (nothing of it has finished: a head still queued is not a
       crash); ``newly_crashing``: the base ran, the head died every time; ``fixed``: the other way round; both
       died: ``unchanged`` (the crash view tells whether the cause moved);
    2. ``now_downgraded``: the head was downgraded and the base was not; ``now_eager_draft``: the head's
       draft ran eagerly and the base's did not (both are fallbacks a number may hide);
    3. the change of ``numbers`` (``verdicts.cell_verdict``): ``worse``, ``undecided``, ``better`` or
       ``unchanged``; ``undecided`` without numbers (both ran, but a side has no tokens/s the statistics can
       read: every one was left out as impossible), never ``unchanged``, which would claim what nobody
       measured. O(1).
    """
    if not (base.ran or base.died) or not (head.ran or head.died):
        return Verdict.PENDING
    if base.ran and not head.ran:
        return Verdict.NEWLY_CRASHING
    if head.ran and not base.ran:
        return Verdict.FIXED
    if not head.ran:
        return Verdict.UNCHANGED
    if head.downgraded and not base.downgraded:
        return Verdict.NOW_DOWNGRADED
    if head.draft_eager and not base.draft_eager:
        return Verdict.NOW_EAGER_DRAFT
    return _BY_CHANGE[numbers.change] if numbers is not None else Verdict.UNDECIDED
