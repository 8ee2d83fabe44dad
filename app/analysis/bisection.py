"""Bisection over an ordered series of builds: which build to run next, and what its verdicts say of it.

Pure functions, no I/O. A bisection starts from a good and a bad member of the series (positions ``good < bad``)
and the change the bad build shows against the good one on some cells (its *symptoms*: a cell's tokens/s or
acceptance called worse or better by ``app.analysis.verdicts``). Each step runs the builds' midpoint and compares
it with the good build and with the bad one: it is bad when it shows a symptom against the good build, good when
every symptom is clear of it (unchanged against the good build, or reversed against the bad one), and undecided
otherwise. An undecided step stops the bisection: the range it reached is the answer, and a bisection
of that range with more starts a side (the sweep's ``repeats``) can go on from there. Guessing a side would send
every later step the wrong way, and more starts of a cell whose noise the verdict cannot call may never decide it
on a host this noisy (``verdicts.THROUGHPUT_SPREAD``), so no step is repeated.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.analysis.verdicts import Change
from app.enums import BisectionState, StepCall

TOKENS_PER_S = "tokens_per_s"
ACCEPTANCE = "acceptance"
METRICS = (TOKENS_PER_S, ACCEPTANCE)
_MOVED = (Change.WORSE, Change.BETTER)


@dataclass(frozen=True)
class Movement:
    """What a comparison called of one cell's metric (``METRICS``): ``change`` None when a side did not measure it
    (the cell died, or did not draft)."""

    cell: str
    metric: str
    change: Change | None


@dataclass(frozen=True)
class Symptom:
    """A change of one cell's metric from the good build to the bad one, in the direction ``change``."""

    cell: str
    metric: str
    change: Change


@dataclass(frozen=True)
class Range:
    """The positions of the last good and the first bad build known, and where the bisection stands."""

    good: int
    bad: int
    state: BisectionState


def symptoms(movements: Iterable[Movement]) -> frozenset[Symptom]:
    """The movements called ``worse`` or ``better`` (bad build against good): what each later step looks for."""
    return frozenset(Symptom(m.cell, m.metric, m.change) for m in movements if m.change in _MOVED)


def call(looked_for: Iterable[Symptom], versus_good: Iterable[Movement], versus_bad: Iterable[Movement] = ()) -> StepCall:
    """A midpoint's verdicts against the good build (``versus_good``) and against the bad one (``versus_bad``) as a
    call on the midpoint.

    ``BAD`` when some symptom's cell and metric moved the same way against the good build (one is enough: the first
    build showing any of the bad build's changes is the one sought). Else ``GOOD`` when every symptom's cell and
    metric is clear of it: called ``unchanged`` or the other way against the good build, or called the other way
    against the bad build (the midpoint faster than the bad build where the bad one was slower than the good one).
    The second reading is what calls a good midpoint where one start a side cannot call ``unchanged``: without a
    noise model a ratio inside the host's A/A spread is ``undecided``, while the symptom itself (0.09x) is called
    from the bad side as clearly as from the good one. Else ``UNDECIDED`` (a cell not measured, or undecided both
    ways); ``UNDECIDED`` too with no symptom at all, as there is nothing to decide by. O(symptoms + movements).
    """
    good_side = {(m.cell, m.metric): m.change for m in versus_good}
    bad_side = {(m.cell, m.metric): m.change for m in versus_bad}
    wanted = list(looked_for)
    if not wanted:
        return StepCall.UNDECIDED
    if any(good_side.get((s.cell, s.metric)) is s.change for s in wanted):
        return StepCall.BAD
    if all(_clear(s, good_side.get((s.cell, s.metric)), bad_side.get((s.cell, s.metric))) for s in wanted):
        return StepCall.GOOD
    return StepCall.UNDECIDED


def midpoint(good: int, bad: int) -> int | None:
    """The position to run next, ``floor((good + bad) / 2)``; None when ``bad == good + 1`` (nothing between)."""
    return (good + bad) // 2 if bad - good > 1 else None


def steps_needed(good: int, bad: int) -> int:
    """Steps a bisection of ``good < bad`` takes at most: ``ceil(log2(bad - good))``, as each step at least halves the
    ``bad - good`` candidates for the first bad build (the run of good and bad themselves not counted)."""
    return math.ceil(math.log2(bad - good)) if bad - good > 1 else 0


def narrow(good: int, bad: int, calls: Sequence[tuple[int, StepCall]]) -> Range:
    """The range after ``calls``, each ``(position, call)`` of a midpoint in the order run.

    A bad midpoint becomes the range's bad end, a good one its good end; an undecided one stops it
    (``BisectionState.UNDECIDED``, the range as it stood). ``FOUND`` once no build lies between the ends.

    Raises
    ------
    ValueError
        ``good >= bad``, or a call at a position that is not the midpoint of the range it was made in, or after the
        bisection stopped.
    """
    if good >= bad:
        raise ValueError(f"the good build's position {good} must come before the bad one's {bad}")
    for position, found in calls:
        expected = midpoint(good, bad)
        if expected is None or position != expected:
            raise ValueError(f"a step at {position}: the range [{good}, {bad}] runs {expected} next")
        if found is StepCall.UNDECIDED:
            return Range(good, bad, BisectionState.UNDECIDED)
        good, bad = (good, position) if found is StepCall.BAD else (position, bad)
    return Range(good, bad, BisectionState.FOUND if midpoint(good, bad) is None else BisectionState.RUNNING)


def _clear(symptom: Symptom, versus_good: Change | None, versus_bad: Change | None) -> bool:
    """The midpoint does not show ``symptom``: unchanged or the other way against the good build, or the other way
    against the bad build (the bad build moved ``symptom.change`` from the good one, so a midpoint without the
    change moves the opposite way from the bad one)."""
    opposite = Change.BETTER if symptom.change is Change.WORSE else Change.WORSE
    return versus_good in (Change.UNCHANGED, opposite) or versus_bad is opposite
