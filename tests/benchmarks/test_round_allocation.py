"""``benchmarks.round_allocation`` pools a class's cells as the noise model does and finds the best rounds."""

import math
import random

import pytest

from app.analysis.noise import group_terms
from benchmarks.round_allocation import Cell, allocate, best_interval


def cell(starts: list[float], rounds: list[list[float]]) -> Cell:
    """A cell whose starts ran 4 rounds of 5 s after 30 s of fixed cost."""
    return Cell(starts=starts, rounds=[group_terms(r) for r in rounds], overhead_s=[30.0] * len(starts),
                round_s=[5.0] * len(starts), ran=[4] * len(starts))


def test_a_class_pools_its_cells_spreads_each_about_its_own_mean() -> None:
    # Starts 0.1 apart about each cell's own mean: s_b^2 = 2 * 0.005 / 2 = 0.005 (df 2). Rounds +-0.2 about each
    # start's mean: s_w^2 = 4 * 4 * 0.04 / (4 * 3) = 0.0533 (df 12). s_s^2 = 0.005 - 0.0533 / 4 < 0: the rounds
    # explain the starts' spread, so the longest start is best.
    rounds = [0.2, -0.2, 0.2, -0.2]
    found = allocate([cell([1.0, 1.1], [rounds, rounds]), cell([5.0, 5.1], [rounds, rounds])])
    assert found.between.sd == pytest.approx(math.sqrt(0.005)) and found.between.df == 2
    assert found.within.sd ** 2 == pytest.approx(16 * 0.04 / 12) and found.within.df == 12
    assert found.start_var == 0.0 and found.best == 50
    # Starts 1.0 apart, the same rounds: s_s^2 = 0.5 - 0.0133 = 0.4867, R* = sqrt(0.0533 * 30 / (0.4867 * 5)) = 0.81
    found = allocate([cell([1.0, 2.0], [rounds, rounds]), cell([5.0, 6.0], [rounds, rounds])])
    assert found.start_var == pytest.approx(0.5 - 16 * 0.04 / 12 / 4) and found.best == 1
    assert found.gpu_time == pytest.approx((found.start_var + found.within.sd ** 2 / 4) * 50
                                           / ((found.start_var + found.within.sd ** 2) * 35))


def test_resampling_needs_three_cells() -> None:
    rounds = [0.2, -0.2, 0.2, -0.2]
    cells = [cell([1.0, 2.0], [rounds, rounds]), cell([5.0, 6.0], [rounds, rounds])]
    assert best_interval(cells, random.Random(0)) is None
    assert best_interval([*cells, cell([3.0, 4.0], [rounds, rounds])], random.Random(0)) == (1, 1)
