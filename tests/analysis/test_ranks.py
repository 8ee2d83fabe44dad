"""The Mann-Whitney U test, exact and normal, by hand."""

import math

import pytest

from app.analysis.ranks import mann_whitney, smallest_p_value


def test_every_head_value_above_every_base_value() -> None:
    # U = 3 x 3 = 9; of the C(6, 3) = 20 orderings one gives U = 9 and one U = 0: p = 2 / 20.
    found = mann_whitney([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert (found.u, found.p_value, found.exact) == (9.0, 0.1, True)


def test_interleaved_samples_are_not_different() -> None:
    # head [1, 4] against base [2, 3]: U = 2 (4 beats both). For m = n = 2 the counts of U = 0..4 are
    # 1, 1, 2, 1, 1 of 6, so P(U <= 2) = 4/6 and p = min(1, 8/6) = 1.
    found = mann_whitney([2.0, 3.0], [1.0, 4.0])
    assert (found.u, found.p_value) == (2.0, 1.0)


def test_ties_take_the_normal_approximation_with_its_correction() -> None:
    # base [1, 1, 2, 2], head [2, 2, 3, 3]: U = 2 x 2 (2 > 1) + 2 x 2 x 1/2 (2 = 2) + 2 x 4 (3 > all) = 14.
    # Tie groups 2, 4, 2: sum (t^3 - t) = 6 + 60 + 6 = 72; N = 8, N (N - 1) = 56.
    # sigma^2 = 16 / 12 x (9 - 72 / 56) = 10.285714; z = (|14 - 8| - 0.5) / 3.2071349 = 1.7149263.
    found = mann_whitney([1.0, 1.0, 2.0, 2.0], [2.0, 2.0, 3.0, 3.0])
    assert found.u == 14.0 and not found.exact
    assert found.p_value == pytest.approx(math.erfc(1.7149263 / math.sqrt(2)), abs=1e-7)


def test_all_tied_is_no_evidence() -> None:
    assert mann_whitney([5.0, 5.0], [5.0, 5.0, 5.0]).p_value == 1.0


def test_more_than_400_pairs_take_the_normal_approximation() -> None:
    # 21 against 20, all distinct, head above base: z = (420 / 2 - 0.5) / sqrt(420 x 42 / 12) = 5.4768.
    found = mann_whitney([float(v) for v in range(20)], [float(v) for v in range(100, 121)])
    assert (found.u, found.exact) == (420.0, False)
    assert found.p_value == pytest.approx(math.erfc(209.5 / math.sqrt(420 * 42 / 12) / math.sqrt(2)))


def test_smallest_p_value() -> None:
    assert smallest_p_value(5, 5) == pytest.approx(2 / 252)
    assert smallest_p_value(7, 7) == pytest.approx(2 / 3432)
    assert smallest_p_value(1, 1) == 1.0


def test_empty_sample_is_refused() -> None:
    with pytest.raises(ValueError, match="base has 0"):
        mann_whitney([], [1.0])
