"""The split of a GPU minute between starts and rounds (``benchmarks.stats.allocation``), computed by hand."""

import math

import pytest

from benchmarks.stats.allocation import best_rounds, cost_of_precision, efficiency, start_variance


def test_the_start_to_start_variance_is_what_the_rounds_leave_of_the_starts_spread() -> None:
    # 0.2^2 - 0.3^2 / 3 = 0.04 - 0.03
    assert start_variance(0.2, 0.3, 3) == pytest.approx(0.01)
    # 0.1^2 - 0.3^2 / 3 < 0: the rounds explain all of it
    assert start_variance(0.1, 0.3, 3) == 0.0


def test_the_best_rounds_minimise_gpu_time_for_one_precision() -> None:
    # sigma_s^2 0.01, sigma_w^2 0.04, C 30 s, T 5 s: R* = sqrt(0.04 * 30 / (0.01 * 5)) = sqrt(24) = 4.90.
    # (0.01 + 0.04/4)(30 + 20) = 1.00, (0.01 + 0.04/5)(30 + 25) = 0.99, (0.01 + 0.04/6)(30 + 30) = 1.00
    assert [cost_of_precision(0.01, 0.04, 30, 5, r) for r in (4, 5, 6)] == pytest.approx([1.0, 0.99, 1.0])
    assert best_rounds(0.01, 0.04, 30, 5) == 5
    # Starts that differ a lot, rounds that barely do: one round a start. (0.1 + 0.001)(30 + 5) = 3.535
    assert best_rounds(0.1, 0.001, 30, 5) == 1 and cost_of_precision(0.1, 0.001, 30, 5, 1) == pytest.approx(3.535)
    # Starts that differ only by their rounds: the longest start allowed.
    assert best_rounds(0.0, 0.04, 30, 5, most=20) == 20


def test_efficiency_is_measured_over_wall_seconds() -> None:
    assert efficiency(30, 5, 5) == pytest.approx(25 / 55)
    assert math.isnan(efficiency(30, 0, 5))
