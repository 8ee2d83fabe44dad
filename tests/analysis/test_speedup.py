"""Best k, break-even load and the counters' predicted speedup, by hand."""

import math

import pytest

from app.analysis.speedup import (
    Pays,
    Point,
    acceptance_length,
    best_k,
    break_even,
    fit_step_costs,
    predicted_speedups,
    step_time,
)


def test_the_break_even_interpolates_on_log_load_between_the_last_point_above_1_and_the_first_below() -> None:
    # share = (1.2 - 1) / (1.2 - 0.8) = 0.5 of the way from ln 4 to ln 16: ln 8.
    points = [Point(64, 0.6, 0.5, 0.7), Point(1, 1.5, 1.3, 1.7), Point(16, 0.8, 0.7, 0.9), Point(4, 1.2, 1.05, 1.35)]
    found = break_even(points)
    assert found.pays is Pays.UP_TO
    assert found.x == pytest.approx(8.0)
    assert (found.low, found.high) == (4, 16)


def test_the_interval_runs_from_the_last_load_surely_above_1_to_the_first_surely_below() -> None:
    # 4 and 16 hold 1 in their intervals: the interval widens to [1, 64] around the same crossing at 8.
    found = break_even([Point(1, 1.5, 1.3, 1.7), Point(4, 1.1, 0.9, 1.3), Point(16, 0.9, 0.8, 1.05), Point(64, 0.6, 0.5, 0.7)])
    assert found.x == pytest.approx(8.0)
    assert (found.low, found.high) == (1, 64)


def test_a_crossing_with_no_load_surely_on_either_side_has_open_ends() -> None:
    found = break_even([Point(2, 1.2, 0.9, 1.5), Point(8, 0.9, 0.7, 1.1)])
    # share = 0.2 / 0.3 of the way from ln 2 to ln 8.
    assert found.x == pytest.approx(math.exp(math.log(2) + (0.2 / 0.3) * math.log(4)))
    assert (found.low, found.high) == (None, None)


def test_a_late_rise_above_1_is_not_taken_for_the_lower_end() -> None:
    # Surely above at 1 and 16, surely below at 4: the lower end is 1, under the first load surely below.
    found = break_even([Point(1, 1.5, 1.4, 1.6), Point(4, 0.5, 0.4, 0.6), Point(16, 1.5, 1.4, 1.6)])
    assert found.x == pytest.approx(2.0)
    assert (found.low, found.high) == (1, 4)


def test_every_interval_above_1_pays_everywhere_and_every_one_below_nowhere() -> None:
    assert break_even([Point(1, 1.5, 1.4, 1.6), Point(8, 1.2, 1.1, 1.3)]).pays is Pays.EVERYWHERE
    assert break_even([Point(1, 0.5, 0.4, 0.6), Point(8, 0.7, 0.6, 0.8)]).pays is Pays.NOWHERE


def test_points_above_1_whose_interval_holds_1_are_undecided_and_say_where() -> None:
    found = break_even([Point(1, 1.5, 1.4, 1.6), Point(8, 1.1, 0.95, 1.25)])
    assert found.pays is Pays.UNDECIDED and "at 8 holds 1" in found.why
    # A point without an interval is never sure.
    assert break_even([Point(1, 1.5)]).pays is Pays.UNDECIDED
    assert break_even([Point(1, 0.5, 0.4, 0.6), Point(8, 0.9, 0.8, 1.05)]).why.startswith("below 1 at every load")
    assert break_even([Point(1, 0.5, 0.4, 0.6), Point(8, 1.5, 1.4, 1.6)]).pays is Pays.UNDECIDED
    assert break_even([]) is None


def test_the_best_k_names_each_other_k_whose_interval_overlaps_its_own() -> None:
    found = best_k({1: Point(1, 1.2, 1.1, 1.3), 2: Point(1, 1.5, 1.4, 1.6), 4: Point(1, 1.45, 1.35, 1.55),
                    8: Point(1, 1.0, 0.9, 1.1)})
    assert (found.k, found.speedup.value, found.within_noise, found.measured) == (2, 1.5, (4,), 4)


def test_a_tie_goes_to_the_shorter_draft_and_a_point_without_interval_overlaps_what_holds_it() -> None:
    assert best_k({4: Point(1, 1.5), 2: Point(1, 1.5)}).k == 2
    found = best_k({1: Point(1, 1.5), 2: Point(1, 1.45, 1.4, 1.6), 3: Point(1, 1.3, 1.2, 1.4)})
    assert (found.k, found.within_noise) == (1, (2,))
    assert best_k({}) is None


def test_tau_is_one_plus_the_per_position_rates() -> None:
    assert acceptance_length([30, 20, 10], 40) == pytest.approx(2.5)  # 1 + 60 / 40
    assert acceptance_length([], 0) == 1.0


def test_a_step_time_offline_and_serving() -> None:
    assert step_time(tau=2.0, tokens_per_s=400.0, in_flight=8) == pytest.approx(0.04)  # 8 x 2 / 400
    assert step_time(tau=2.5, tpot=5.0) == pytest.approx(12.5)
    with pytest.raises(ValueError, match="tpot"):
        step_time(tau=2.0, tokens_per_s=0.0, in_flight=8)


def test_the_step_costs_by_least_squares() -> None:
    exact = fit_step_costs({1: 3.0, 2: 5.0, 3: 7.0})
    assert (exact.verify, exact.draft) == pytest.approx((1.0, 2.0))
    # kbar 2, Tbar 16/3: draft = ((-1)(-7/3) + (1)(5/3)) / 2 = 2, verify = 16/3 - 4 = 4/3.
    noisy = fit_step_costs({1: 3.0, 2: 6.0, 3: 7.0})
    assert (noisy.verify, noisy.draft, noisy.ks) == pytest.approx((4 / 3, 2.0, 3))
    assert fit_step_costs({3: 7.0}) is None


def test_the_predicted_speedup_and_the_cell_that_leaves_it() -> None:
    # T_fit = 4/3 + 2k; T0 = 2: k=1 1.8 x 2 / (10/3) = 1.08, k=2 2.4 x 2 / (16/3) = 0.9, k=3 2.7 x 2 / (22/3) = 0.736.
    found = predicted_speedups(taus={1: 1.8, 2: 2.4, 3: 2.7}, times={1: 3.0, 2: 6.0, 3: 7.0}, baseline_time=2.0,
                               measured={1: Point(1, 1.1, 1.0, 1.2), 2: Point(1, 0.8, 0.75, 0.85), 3: Point(1, 0.7)})
    assert [found[k].predicted for k in (1, 2, 3)] == pytest.approx([1.08, 0.9, 16.2 / 22])
    # 0.9 lies outside k=2's [0.75, 0.85]; k=3 has no interval, so it cannot be called off.
    assert [found[k].off for k in (1, 2, 3)] == [False, True, False]


def test_one_k_cannot_predict() -> None:
    found = predicted_speedups(taus={3: 2.0}, times={3: 5.0}, baseline_time=2.0, measured={3: Point(1, 0.8, 0.7, 0.9)})
    assert (found[3].predicted, found[3].off) == (None, False)


def test_points_below_1_first_then_above_say_where_each_lies_even_when_they_cross_back() -> None:
    # Below at the fewest loads, above at more: the loads on each side.
    found = break_even([Point(1, 0.5, 0.4, 0.6), Point(8, 1.5, 1.4, 1.6)])
    assert found.why == "below 1 at 1 and at or above 1 at 8"
    # The H100's k=1 line (tests/data/h100-2026-12-05b): 1.00x, 0.96x, 1.05x and 0.88x at 1, 4, 16 and 64 clients. It
    # crosses 1 twice, so "above 1 at more" (said before) was false: the points below are at 1, 4 and 64.
    found = break_even([Point(1, 0.998, 0.96, 1.04), Point(4, 0.96, 0.93, 0.99), Point(16, 1.05, 0.93, 1.18),
                        Point(64, 0.88, 0.70, 1.12)])
    assert found.pays is Pays.UNDECIDED
    assert found.why == "below 1 at 1, 4 and 64 and at or above 1 at 16; the intervals at 1, 16 and 64 hold 1"
    # One interval holding 1 is said in the singular.
    assert break_even([Point(1, 0.9, 0.8, 1.05), Point(4, 1.5, 1.4, 1.6)]).why.endswith("; the interval at 1 holds 1")
    # Several loads holding 1 read alike in every branch (before: "the interval at 4, 16 holds 1").
    found = break_even([Point(1, 1.5, 1.4, 1.6), Point(4, 1.2, 0.9, 1.5), Point(16, 1.1, 0.95, 1.25)])
    assert found.why == "above 1 at every load measured, but the intervals at 4 and 16 hold 1"
