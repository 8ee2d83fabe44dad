"""The bisection's rule on hand-built verdicts and simulated series."""

import pytest

from app.analysis.bisection import (
    ACCEPTANCE,
    TOKENS_PER_S,
    Movement,
    Range,
    Symptom,
    call,
    midpoint,
    narrow,
    steps_needed,
    symptoms,
)
from app.analysis.verdicts import Change
from app.enums import BisectionState, StepCall

CELL = "cpu ngram k=3 CPU_ATTN NONE"
OTHER = "cpu draft_model k=3 CPU_ATTN NONE"
SLOWER = Symptom(CELL, TOKENS_PER_S, Change.WORSE)


def _bisect(first_bad: int, good: int, bad: int) -> tuple[Range, int]:
    """Run a simulated series whose builds from ``first_bad`` on are bad; returns the range and the steps taken."""
    calls: list[tuple[int, StepCall]] = []
    while (at := midpoint(*_ends(good, bad, calls))) is not None:
        calls.append((at, StepCall.BAD if at >= first_bad else StepCall.GOOD))
    return narrow(good, bad, calls), len(calls)


def _ends(good: int, bad: int, calls: list[tuple[int, StepCall]]) -> tuple[int, int]:
    found = narrow(good, bad, calls)
    return found.good, found.bad


def test_symptoms_are_the_calls_that_moved() -> None:
    moved = symptoms([Movement(CELL, TOKENS_PER_S, Change.WORSE), Movement(CELL, ACCEPTANCE, Change.UNCHANGED),
                      Movement(OTHER, TOKENS_PER_S, Change.UNDECIDED), Movement(OTHER, ACCEPTANCE, None),
                      Movement(OTHER, ACCEPTANCE, Change.BETTER)])
    assert moved == {SLOWER, Symptom(OTHER, ACCEPTANCE, Change.BETTER)}


def test_a_midpoint_that_moved_the_same_metric_the_same_way_is_bad() -> None:
    assert call({SLOWER}, [Movement(CELL, TOKENS_PER_S, Change.WORSE), Movement(CELL, ACCEPTANCE, Change.UNCHANGED)]) is StepCall.BAD


def test_one_symptom_seen_of_two_is_bad_whatever_the_other_says() -> None:
    # The first build showing any of the bad build's changes is the one sought.
    looked_for = {SLOWER, Symptom(OTHER, ACCEPTANCE, Change.WORSE)}
    moved = [Movement(CELL, TOKENS_PER_S, Change.WORSE), Movement(OTHER, ACCEPTANCE, Change.UNDECIDED)]
    assert call(looked_for, moved) is StepCall.BAD


def test_a_midpoint_unchanged_or_moved_the_other_way_is_good() -> None:
    assert call({SLOWER}, [Movement(CELL, TOKENS_PER_S, Change.UNCHANGED)]) is StepCall.GOOD
    assert call({SLOWER}, [Movement(CELL, TOKENS_PER_S, Change.BETTER)]) is StepCall.GOOD
    # Another metric of the cell moving is not the symptom.
    assert call({SLOWER}, [Movement(CELL, TOKENS_PER_S, Change.UNCHANGED), Movement(CELL, ACCEPTANCE, Change.WORSE)]) is StepCall.GOOD


def test_a_symptom_not_called_or_not_measured_leaves_the_midpoint_undecided() -> None:
    assert call({SLOWER}, [Movement(CELL, TOKENS_PER_S, Change.UNDECIDED)]) is StepCall.UNDECIDED
    assert call({SLOWER}, [Movement(CELL, TOKENS_PER_S, None)]) is StepCall.UNDECIDED
    assert call({SLOWER}, [Movement(OTHER, TOKENS_PER_S, Change.WORSE)]) is StepCall.UNDECIDED
    assert call(set(), [Movement(CELL, TOKENS_PER_S, Change.WORSE)]) is StepCall.UNDECIDED


def test_a_midpoint_undecided_against_good_but_reversed_against_bad_is_good() -> None:
    """The real slow series on the shared CPU host: one start a side, no noise model, so a good midpoint 1.2x the
    good build's is undecided against it; against the bad build (0.09x the good one) it is called faster."""
    undecided = [Movement(CELL, TOKENS_PER_S, Change.UNDECIDED)]
    assert call({SLOWER}, undecided, [Movement(CELL, TOKENS_PER_S, Change.BETTER)]) is StepCall.GOOD
    assert call({SLOWER}, undecided, [Movement(CELL, TOKENS_PER_S, Change.UNDECIDED)]) is StepCall.UNDECIDED
    # Slower than the bad build too is no sign of being clear of the slowdown.
    assert call({SLOWER}, undecided, [Movement(CELL, TOKENS_PER_S, Change.WORSE)]) is StepCall.UNDECIDED
    # Showing the symptom against the good build decides, whatever it shows against the bad one.
    assert call({SLOWER}, [Movement(CELL, TOKENS_PER_S, Change.WORSE)], [Movement(CELL, TOKENS_PER_S, Change.BETTER)]) is StepCall.BAD
    # A rise in acceptance (the symptom BETTER) is reversed by a midpoint that accepts less than the bad build.
    higher = Symptom(CELL, ACCEPTANCE, Change.BETTER)
    assert call({higher}, [Movement(CELL, ACCEPTANCE, None)], [Movement(CELL, ACCEPTANCE, Change.WORSE)]) is StepCall.GOOD


def test_midpoint_and_steps_by_hand() -> None:
    assert [midpoint(0, 7), midpoint(3, 7), midpoint(3, 5), midpoint(3, 4)] == [3, 5, 4, None]
    # ceil(log2(7)) = 3, ceil(log2(4)) = 2, ceil(log2(2)) = 1, and nothing between 3 and 4.
    assert [steps_needed(0, 7), steps_needed(0, 4), steps_needed(0, 2), steps_needed(3, 4)] == [3, 2, 1, 0]


def test_the_fifth_of_eight_builds_is_found_in_three_steps() -> None:
    # 0..7: 3 good (runs 3), 5 bad (runs 5), 4 bad (runs 4): last good 3, first bad 4.
    assert narrow(0, 7, [(3, StepCall.GOOD), (5, StepCall.BAD), (4, StepCall.BAD)]) == Range(3, 4, BisectionState.FOUND)
    assert narrow(0, 7, [(3, StepCall.GOOD)]) == Range(3, 7, BisectionState.RUNNING)


@pytest.mark.parametrize("length", [2, 3, 5, 8, 9, 17, 100])
def test_every_first_bad_build_of_a_simulated_series_is_found_within_ceil_log2_steps(length: int) -> None:
    for first_bad in range(1, length):
        found, steps = _bisect(first_bad, 0, length - 1)
        assert (found.good, found.bad, found.state) == (first_bad - 1, first_bad, BisectionState.FOUND)
        assert steps <= steps_needed(0, length - 1)


def test_an_undecided_step_stops_with_the_range_it_reached() -> None:
    assert narrow(0, 7, [(3, StepCall.GOOD), (5, StepCall.UNDECIDED)]) == Range(3, 7, BisectionState.UNDECIDED)


def test_a_step_off_the_midpoint_or_after_the_end_is_refused() -> None:
    with pytest.raises(ValueError, match="runs 3 next"):
        narrow(0, 7, [(4, StepCall.BAD)])
    with pytest.raises(ValueError, match="runs None next"):
        narrow(3, 4, [(3, StepCall.BAD)])
    with pytest.raises(ValueError, match="must come before"):
        narrow(5, 2, [])
