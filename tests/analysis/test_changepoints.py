"""Change points between consecutive runs, by hand."""

from app.analysis.changepoints import Point, change_points


def test_a_step_beyond_both_intervals_is_a_change_point() -> None:
    points = [Point(100, 95, 105), Point(101, 96, 106), Point(80, 76, 84), Point(81, 77, 85)]
    assert change_points(points, 0.05) == [2]


def test_overlapping_intervals_are_noise() -> None:
    assert change_points([Point(100, 90, 110), Point(92, 85, 99)], 0.05) == []


def test_a_small_step_between_tight_intervals_is_below_the_minimum() -> None:
    assert change_points([Point(100, 99.9, 100.1), Point(99, 98.9, 99.1)], 0.05) == []


def test_a_point_without_an_interval_is_never_a_change_point() -> None:
    assert change_points([Point(100, None, None), Point(50, 49, 51), Point(100, 99, 101)], 0.05) == [2]
