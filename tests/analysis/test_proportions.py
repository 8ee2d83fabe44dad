"""Two-proportion tests of acceptance, against Newcombe's published examples and by hand."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.analysis.proportions import per_position_changes, two_proportions


def test_newcombe_1998_example_a() -> None:
    # Newcombe (1998), Table II, 56/70 against 48/80: method 10 gives 0.0524 to 0.3339.
    found = two_proportions(48, 80, 56, 70)
    assert found.difference == pytest.approx(0.2)
    assert (found.low, found.high) == pytest.approx((0.0524, 0.3339), abs=5e-5)


def test_newcombe_1998_example_b() -> None:
    # 9/10 against 3/10: method 10 gives 0.1705 to 0.8090.
    found = two_proportions(3, 10, 9, 10)
    assert (found.low, found.high) == pytest.approx((0.1705, 0.8090), abs=5e-5)


def test_pooled_z_by_hand() -> None:
    # 80/100 against 60/100: pooled 0.7, se = sqrt(0.7 * 0.3 * (1/100 + 1/100)) = sqrt(0.0042) = 0.0648074,
    # z = -0.2 / 0.0648074 = -3.086067, p = erfc(3.086067 / sqrt 2) = 0.0020282.
    found = two_proportions(80, 100, 60, 100)
    assert found.z == pytest.approx(-3.086067, abs=1e-6)
    assert found.p_value == pytest.approx(0.0020282, abs=1e-7)
    # Just above asv's 0.002: not flagged at the default level, flagged at 0.01.
    assert not found.flagged
    assert two_proportions(80, 100, 60, 100, alpha=0.01).flagged


def test_a_tiny_difference_on_a_huge_sample_is_not_flagged() -> None:
    # 70.0 % against 69.5 % over 10 million draft tokens each: z is about -24, p far below any level, but
    # half a point is below the 2-point minimum effect.
    found = two_proportions(7_000_000, 10_000_000, 6_950_000, 10_000_000)
    assert found.p_value < 1e-12
    assert not found.flagged
    assert two_proportions(7_000_000, 10_000_000, 6_950_000, 10_000_000, min_effect=0.004).flagged


def test_equal_rates_of_zero_or_one_have_no_variance() -> None:
    for successes in (0, 50):
        found = two_proportions(successes, 50, successes * 2, 100)
        assert (found.z, found.p_value, found.flagged) == (0.0, 1.0, False)


def test_no_trials_is_refused() -> None:
    with pytest.raises(ValueError, match="trials"):
        two_proportions(0, 0, 1, 2)


def test_per_position_tests_share_the_level() -> None:
    # Position 1: 90/100 against 75/100 (pooled 0.825, z = -0.15 / sqrt(0.825 * 0.175 / 50) = -2.7915, p = 0.0052);
    # position 2: the same counts. Each alone passes alpha = 0.01, but with 2 positions each is tested at 0.005.
    found = per_position_changes([90, 90], 100, [75, 75], 100, alpha=0.01)
    assert [round(c.p_value, 4) for c in found] == [0.0052, 0.0052]
    assert not any(c.flagged for c in found)
    assert all(c.flagged for c in per_position_changes([90], 100, [75], 100, alpha=0.011))


def test_per_position_compares_the_positions_both_measured() -> None:
    assert len(per_position_changes([9, 8, 7], 10, [9, 8], 10)) == 2
    assert per_position_changes([9], 0, [9], 10) == ()


counts = st.integers(min_value=1, max_value=5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))


@given(counts, counts)
def test_the_interval_holds_the_difference_and_stays_in_range(base: tuple[int, int], head: tuple[int, int]) -> None:
    found = two_proportions(*base, *head)
    assert -1.0 - 1e-12 <= found.low <= found.difference <= found.high <= 1.0 + 1e-12
    assert 0.0 <= found.p_value <= 1.0 and not math.isnan(found.z)


@given(counts)
def test_identical_counts_are_never_flagged(side: tuple[int, int]) -> None:
    found = two_proportions(*side, *side)
    assert (found.difference, found.p_value, found.flagged) == (0.0, 1.0, False)
