"""The A/A check between engine starts, by hand and on seeded noise."""

import random

import pytest

from app.analysis.rounds import median_interval
from benchmarks.stats.rounds import aa_check, inside_probability


@pytest.mark.parametrize(
    ("n", "m", "expected"),
    [
        (2, 1, 1 / 3),  # one value between the two of the other start: 1 of 3 equally likely places
        (3, 1, 2 / 4),  # between the min and the max of three: 2 of 4 places
        (5, 5, 210 / 252),  # 3*15 + 6*10 + 10*6 + 15*3 interleavings with 1-4 of the five below the median
        (9, 1, 6 / 10),  # [x_(2), x_(8)]: 6 of the 10 places
    ],
)
def test_inside_probability_by_hand(n: int, m: int, expected: float) -> None:
    assert inside_probability(n, m) == pytest.approx(expected)


def test_inside_probability_matches_a_seeded_simulation() -> None:
    rng, hits, trials = random.Random(7), 0, 20_000
    for _ in range(trials):
        mine = median_interval([rng.lognormvariate(0, 0.1) for _ in range(5)])
        other = median_interval([rng.lognormvariate(0, 0.1) for _ in range(5)])
        hits += mine.low <= other.median <= mine.high
    # Standard error of the simulated share: sqrt(p (1 - p) / trials) = 0.0026.
    assert hits / trials == pytest.approx(5 / 6, abs=0.01)


def test_inside_probability_needs_an_interval_and_an_odd_count() -> None:
    with pytest.raises(ValueError, match="no interval"):
        inside_probability(1, 5)
    with pytest.raises(ValueError, match="odd"):
        inside_probability(5, 4)


def test_aa_check_by_hand() -> None:
    # Two starts of three rounds that do not overlap: no hit. Of the 20 ways to split the six values into
    # two starts, 4 give no hit, 8 one and 8 two, so 1.2 hits are expected and 0 is seen with chance 4/20.
    found = aa_check([[[1.0, 2.0, 3.0], [10.0, 11.0, 12.0]]], permutations=20_000, seed=1)
    assert (found.hits, found.pairs) == (0, 2)
    assert found.expected == pytest.approx(2 * inside_probability(3, 3)) == pytest.approx(1.2)
    assert found.p_value == pytest.approx(0.2, abs=0.01)


def test_aa_check_tells_starts_apart_only_when_they_differ() -> None:
    rng = random.Random(3)
    same = [[[rng.gauss(100, 5) for _ in range(5)] for _ in range(3)] for _ in range(4)]
    apart = [[[rng.gauss(level, 5) for _ in range(5)] for level in (100, 130, 160)] for _ in range(4)]
    assert aa_check(same, permutations=2000).p_value > 0.05
    differ = aa_check(apart, permutations=2000)
    assert differ.hits == 0 and differ.pairs == 24 and differ.p_value < 0.001


def test_aa_check_needs_two_starts_of_an_odd_number_of_rounds() -> None:
    with pytest.raises(ValueError, match="two engine starts"):
        aa_check([[[1.0, 2.0, 3.0]], [[1.0, 2.0], [3.0, 4.0]]])
