"""Step detection on a cell's history: tiny hand-built histories with exact answers, a seeded noisy one, properties."""

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.analysis.changepoints import (
    Point,
    Regression,
    Segment,
    default_penalty,
    detect_steps,
    interval_steps,
    open_regression,
    steps,
)


def test_a_step_worth_more_than_its_penalty_is_found() -> None:
    # One segment: median 3, cost 6 x 2 = 12. Two segments: cost 0 + penalty 1.
    assert detect_steps([1, 1, 1, 5, 5, 5], penalty=1) == (Segment(0, 3, 1), Segment(3, 6, 5))


def test_a_step_worth_exactly_its_penalty_is_not_taken() -> None:
    assert detect_steps([1, 1, 1, 5, 5, 5], penalty=12) == (Segment(0, 6, 3.0),)


def test_a_single_outlying_build_is_not_a_step() -> None:
    # With segments of one point allowed, 9 would be cut out (cost 8 against 2 x penalty 1); the default
    # minimum of 2 points leaves only [1, 1, 1, 9] + [1, 1, 1] (8 + 1) or [1, 1, 1] + [9, 1, 1, 1] (8 + 1).
    values = [1, 1, 1, 9, 1, 1, 1]
    assert detect_steps(values, penalty=1, min_size=1) == (Segment(0, 3, 1), Segment(3, 4, 9), Segment(4, 7, 1))
    assert detect_steps(values, penalty=1) == (Segment(0, 7, 1),)


def test_two_steps() -> None:
    values = [10, 10, 10, 20, 20, 20, 15, 15, 15]
    assert [s.start for s in detect_steps(values, penalty=1)] == [0, 3, 6]


def test_short_and_empty_histories() -> None:
    assert detect_steps([]) == ()
    assert detect_steps([4.0, 8.0, 6.0]) == (Segment(0, 3, 6.0),)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="penalty must be non-negative"):
        detect_steps([1, 2, 3, 4], penalty=-1)
    with pytest.raises(ValueError, match="min_size must be at least 1"):
        detect_steps([1, 2, 3, 4], min_size=0)


def test_default_penalty_by_hand() -> None:
    # Constant at 10: no jumps, so the floor 0.005 x 10 = 0.05: gamma = 2.5 x ln 4 x 0.05.
    assert default_penalty([10.0] * 4) == pytest.approx(2.5 * math.log(4) * 0.05)
    # Alternating 0, 1: every jump is 1, sigma = 1.4826 / sqrt 2 = 1.0483617; the level is 0, no floor.
    assert default_penalty([0.0, 1.0, 0.0, 1.0, 0.0]) == pytest.approx(2.5 * math.log(5) * 1.4826 / math.sqrt(2))
    assert default_penalty([3.0]) == 0.0


def test_a_drop_that_stays_is_an_open_regression() -> None:
    found = open_regression([100, 100, 100, 80, 80, 80], penalty=1)
    assert found == Regression(first_bad=3, before=100, after=80)
    assert found.change == pytest.approx(-0.2)


def test_a_drop_in_two_steps_starts_at_the_first() -> None:
    assert open_regression([100, 100, 90, 90, 80, 80], penalty=1) == Regression(2, 100.0, 80.0)


def test_a_recovered_drop_is_closed() -> None:
    assert open_regression([100, 100, 80, 80, 100, 100], penalty=1) is None


def test_the_latest_good_level_is_the_reference() -> None:
    # Good, bad, good again, bad again: the second drop (from point 6) is the open one.
    assert open_regression([100, 100, 80, 80, 100, 100, 90, 90], penalty=1) == Regression(6, 100.0, 90.0)


def test_lower_is_better_for_latencies() -> None:
    assert open_regression([1.0, 1.0, 2.0, 2.0], penalty=0.1, higher_is_better=False) == Regression(2, 1.0, 2.0)
    assert open_regression([2.0, 2.0, 1.0, 1.0], penalty=0.1, higher_is_better=False) is None


def test_a_small_drop_below_min_change_is_ignored() -> None:
    assert open_regression([100, 100, 99, 99], penalty=0.1, min_change=0.02) is None
    assert open_regression([100, 100, 99, 99], penalty=0.1) == Regression(2, 100.0, 99.0)


def test_a_relative_fit_finds_the_drop_one_noisy_fast_build_hides_from_the_linear_fit() -> None:
    # Tokens/s of one CPU cell on five builds, the last two slowed (a fresh-clone CI run read 1326 and 866 for
    # two identical builds). Linear: jumps 460, 434, 1093, 7, median 447, sigma 1.4826 x 447 / sqrt 2 = 468.6,
    # gamma = 2.5 ln 5 x 468.6 = 1885.6; one segment (median 866) costs 460 + 0 + 434 + 659 + 666 = 2219, the
    # split after 1300 costs 26 + 434 + 0 + 3.5 + 3.5 = 467 + gamma = 2352.6: no step.
    values = [1326, 866, 1300, 207, 200]
    assert open_regression(values) is None
    # On ln: jumps 0.4260, 0.4062, 1.8374, 0.0344, median 0.4161, sigma 0.4363, gamma 1.7553; one segment
    # costs 3.7290, the split 0.4604 + 1.7553 = 2.2157: the drop from 1300 to 203.5 (the medians of the values).
    assert open_regression(values, relative=True) == Regression(first_bad=3, before=1300, after=203.5)


def test_a_relative_fit_floors_its_noise_at_a_relative_spread() -> None:
    # Constant at 1000: no jumps, so sigma is the floor 0.005 itself (not 0.005 x ln 1000).
    assert default_penalty([1000.0] * 4, relative=True) == pytest.approx(2.5 * math.log(4) * 0.005)
    with pytest.raises(ValueError, match="positive"):
        detect_steps([10.0, 0.0, 10.0, 10.0], relative=True)


def test_seeded_multiplicative_noise_alone_has_no_relative_step() -> None:
    # Host noise of 20 % (log-normal) on a 1000 tok/s cell: no step in any of 50 seeded histories of 50.
    rng = random.Random(11)
    histories = [[1000 * math.exp(rng.gauss(0, 0.2)) for _ in range(50)] for _ in range(50)]
    assert sum(len(detect_steps(h, relative=True)) > 1 for h in histories) == 0


def test_seeded_noise_with_a_ten_percent_drop() -> None:
    rng = random.Random(12)
    values = [100 + rng.gauss(0, 1) for _ in range(40)] + [90 + rng.gauss(0, 1) for _ in range(10)]
    found = open_regression(values)
    assert found is not None and found.first_bad == 40
    assert found.change == pytest.approx(-0.10, abs=0.01)


def test_seeded_noise_alone_has_no_step() -> None:
    # The default penalty's false-positive rate on pure noise: no step in any of 50 seeded histories of 50.
    rng = random.Random(7)
    assert sum(len(detect_steps([100 + rng.gauss(0, 1) for _ in range(50)])) > 1 for _ in range(50)) == 0


histories = st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), max_size=40)


@given(histories, st.floats(min_value=0, max_value=1e6), st.integers(1, 4))
def test_segments_cover_the_history_in_order(values: list[float], penalty: float, min_size: int) -> None:
    segments = detect_steps(values, penalty=penalty, min_size=min_size)
    if not values:
        assert segments == ()
        return
    assert [s.start for s in segments] == [0, *(s.end for s in segments[:-1])]
    assert sum(s.end - s.start for s in segments) == len(values)
    assert len(segments) == 1 or all(s.end - s.start >= min_size for s in segments)


@given(st.floats(min_value=-1e6, max_value=1e6), st.integers(0, 60))
def test_a_constant_history_has_no_step(value: float, n: int) -> None:
    assert len(detect_steps([value] * n)) == min(n, 1)
    assert open_regression([value] * n) is None


# Neighbours' intervals, for histories too short for the step fit.

def test_a_step_beyond_both_intervals_is_a_change_point() -> None:
    points = [Point(100, 95, 105), Point(101, 96, 106), Point(80, 76, 84), Point(81, 77, 85)]
    assert interval_steps(points, 0.05) == [2]


def test_overlapping_intervals_are_noise() -> None:
    assert interval_steps([Point(100, 90, 110), Point(92, 85, 99)], 0.05) == []


def test_a_small_step_between_tight_intervals_is_below_the_minimum() -> None:
    assert interval_steps([Point(100, 99.9, 100.1), Point(99, 98.9, 99.1)], 0.05) == []


def test_a_point_without_an_interval_is_never_a_change_point() -> None:
    assert interval_steps([Point(100, None, None), Point(50, 49, 51), Point(100, 99, 101)], 0.05) == [2]


def test_short_histories_use_intervals_and_long_ones_the_step_fit() -> None:
    short = [Point(100, 95, 105), Point(80, 76, 84)]
    assert steps(short, 0.05) == [1]
    long = [Point(v, v - 1, v + 1) for v in (100, 101, 100, 101, 80, 81, 80, 81)]
    assert steps(long, 0.05) == [4]
