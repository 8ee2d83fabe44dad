"""A cell's speed over its repeats and the ratio of two cells, by hand."""

import math

import pytest

from app.analysis.fallback import CellSpeed, RepeatSpeed, pool_repeats, ratio, repeat_interval, repeat_se_log

Z_9375 = 1.8627319  # Phi^-1((1 + 0.9375) / 2): five rounds' range holds the median at 93.75 %


def test_five_rounds_range_read_as_a_log_scale_standard_error() -> None:
    # (ln 125 - ln 80) / (2 x 1.8627) = 0.44629 / 3.72546
    assert repeat_se_log(RepeatSpeed(100.0, 80.0, 125.0, 5)) == pytest.approx(0.44629 / (2 * Z_9375), rel=1e-4)


def test_one_round_has_no_spread_to_read() -> None:
    assert repeat_se_log(RepeatSpeed(100.0, None, None, 1)) is None


def test_two_repeats_without_intervals_spread_by_their_own_difference() -> None:
    # sd of (ln 100, ln 121) = ln(1.21) / sqrt 2, over sqrt 2 repeats: ln(1.21) / 2
    cell = pool_repeats([RepeatSpeed(100.0, None, None, 1), RepeatSpeed(121.0, None, None, 1)])
    assert (cell.median, cell.repeats, cell.rounds) == (110.5, 2, 2)
    assert cell.se_log == pytest.approx(math.log(1.21) / 2)


def test_the_wider_of_within_and_between_spread_is_kept() -> None:
    # Within: each repeat's se is ln(1.5625) / 3.7255 = 0.11979; sqrt(2 x 0.11979^2) / 2 = 0.08471.
    # Between: ln(101 / 100) / 2 = 0.004975. Within wins: the two starts happened to agree.
    cell = pool_repeats([RepeatSpeed(100.0, 80.0, 125.0, 5), RepeatSpeed(101.0, 80.8, 126.25, 5)])
    assert cell.se_log == pytest.approx(0.11979 / math.sqrt(2), rel=1e-3)


def test_one_repeat_of_one_round_has_a_point_and_no_interval() -> None:
    cell = pool_repeats([RepeatSpeed(3366.0, None, None, 1)])
    assert (cell.median, cell.se_log) == (3366.0, None)
    # The H200 matrix: FLASHINFER's DFlash cell, downgraded to PIECEWISE, against FLASH_ATTN's FULL_AND_PIECEWISE.
    found = ratio(cell, pool_repeats([RepeatSpeed(5167.0, None, None, 1)]))
    assert found.value == pytest.approx(0.6514, abs=1e-4) and (found.low, found.high) == (None, None)


def test_ratio_interval_adds_the_two_errors_on_the_log_scale() -> None:
    # 0.65 x exp(+-1.96 x sqrt(0.03^2 + 0.04^2)) = 0.65 x exp(+-0.098)
    found = ratio(CellSpeed(65.0, 0.03, 3, 15), CellSpeed(100.0, 0.04, 3, 15))
    assert found.value == pytest.approx(0.65)
    assert (found.low, found.high) == (pytest.approx(0.5893, abs=1e-4), pytest.approx(0.7169, abs=1e-4))


def test_no_repeats_or_a_zero_speed_is_refused() -> None:
    with pytest.raises(ValueError, match="no repeats"):
        pool_repeats([])
    with pytest.raises(ValueError, match="positive"):
        pool_repeats([RepeatSpeed(0.0, None, None, 1)])


def test_one_starts_interval_is_carried_to_95_percent_side_by_side() -> None:
    # Five rounds: the range at 93.75 %, z = 1.8627; to 95 % each side's log grows by 1.95996 / 1.8627 = 1.0522:
    # 100 x 0.5^1.0522 = 48.22 and 100 x 1.1^1.0522 = 110.55. The symmetric form reaches
    # exp(ln 100 + 1.96 (ln 110 - ln 50) / (2 x 1.8627)) = 151.4, far past the fastest round (110).
    low, high = repeat_interval(RepeatSpeed(100.0, 50.0, 110.0, 5))
    assert (low, high) == (pytest.approx(48.223, abs=1e-3), pytest.approx(110.549, abs=1e-3))
    speed = pool_repeats([RepeatSpeed(100.0, 50.0, 110.0, 5)])
    assert 100.0 * math.exp(1.959964 * speed.se_log) == pytest.approx(151.4, abs=0.1)
    assert repeat_interval(RepeatSpeed(100.0, None, None, 1)) is None
