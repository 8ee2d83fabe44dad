"""Whether a comparison fails a pull request's check, by ``draftbench ci --fail-on``."""

import enum

from app.analysis.verdicts import Change
from app.enums import Verdict
from app.schemas.compare import CellChange, Comparison

# Cells that now run something else than in the base: their verdict names the fallback before any number.
FALLBACKS = (Verdict.NOW_DOWNGRADED, Verdict.NOW_EAGER_DRAFT)


class FailOn(enum.StrEnum):
    REGRESSION = "regression"  # a cell worse (slower or accepting less), newly crashing, or a fallback called slower
    CRASH = "crash"  # a cell newly crashing
    ANY = "any"  # any of those, a cell now downgraded or with an eager draft, or a graph-capture alarm
    NEVER = "never"  # only report


_FAILING = {
    FailOn.REGRESSION: {Verdict.WORSE, Verdict.NEWLY_CRASHING},
    FailOn.CRASH: {Verdict.NEWLY_CRASHING},
    FailOn.ANY: {Verdict.WORSE, Verdict.NEWLY_CRASHING, *FALLBACKS},
    FailOn.NEVER: set(),
}


def failures(comparison: Comparison, fail_on: FailOn) -> list[str]:
    """What fails the check, one phrase per verdict kind (``2 worse``); empty when it passes."""
    found = [f"{comparison.counts[v]} {v.value.replace('_', ' ')}" for v in Verdict
             if v in _FAILING[fail_on] and comparison.counts.get(v)]
    if fail_on is FailOn.REGRESSION and (slower := sum(map(slower_fallback, comparison.changes))):
        found.append(f"{slower} now running something else, and slower")
    if fail_on is FailOn.ANY and comparison.alarms:
        found.append(f"{len(comparison.alarms)} graph-capture alarm(s)")
    return found


def slower_fallback(change: CellChange) -> bool:
    """A cell that now runs something else (a downgraded graph mode, an eager draft) and whose tokens/s its call found
    slower: the shape of vLLM's eager DFlash fix, a regression by its speed as well as a fallback."""
    call = change.tokens_per_s_call
    return change.verdict in FALLBACKS and call is not None and call.change is Change.WORSE
