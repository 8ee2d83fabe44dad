"""The median of a cell's rounds and its order-statistic interval, by hand."""

import pytest

from app.analysis.rounds import coverage, efficiency, median_interval


@pytest.mark.parametrize(
    ("n", "k", "expected"),
    # 1 - 2 x sum_{i<k} C(n, i) / 2^n
    [(2, 1, 0.5), (3, 1, 0.75), (5, 1, 0.9375), (6, 1, 0.96875), (9, 2, 1 - 2 * 10 / 512), (10, 2, 1 - 2 * 11 / 1024)],
)
def test_coverage_by_hand(n: int, k: int, expected: float) -> None:
    assert coverage(n, k) == pytest.approx(expected)


def test_five_rounds_give_the_range_at_93_75_percent() -> None:
    found = median_interval([105.0, 98.0, 101.0, 110.0, 99.0])
    assert (found.median, found.low, found.high, found.confidence, found.n) == (101.0, 98.0, 110.0, 0.9375, 5)


def test_nine_rounds_drop_one_value_from_each_end() -> None:
    found = median_interval([float(v) for v in range(1, 10)])
    assert (found.median, found.low, found.high) == (5.0, 2.0, 8.0)
    assert found.confidence == pytest.approx(1 - 20 / 512)


def test_one_round_has_a_median_and_no_interval() -> None:
    found = median_interval([42.0])
    assert (found.median, found.low, found.high, found.confidence) == (42.0, None, None, None)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError):
        median_interval([])
    with pytest.raises(ValueError):
        median_interval([1.0], confidence=1.0)
    with pytest.raises(ValueError):
        coverage(5, 4)


def test_efficiency() -> None:
    assert efficiency(25.0, 50.0) == 0.5 and efficiency(1.0, 0.0) is None
