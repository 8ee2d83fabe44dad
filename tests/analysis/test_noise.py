"""app.analysis.noise: hand-computed figures and Student's t against its printed tables."""

import math
import random

import pytest

from app.analysis.noise import (
    NoiseClass,
    Spread,
    detectable,
    fewest_holding,
    group_terms,
    log_values,
    method_class,
    min_detectable_effect,
    pooled_spread,
    regularized_beta,
    standard_error,
    t_cdf,
    t_quantile,
    uneven_starts,
)


@pytest.mark.parametrize(("p", "df", "table"), [
    (0.975, 5, 2.5706), (0.975, 10, 2.2281), (0.975, 30, 2.0423), (0.975, 1, 12.7062), (0.975, 2, 4.3027),
    (0.8, 10, 0.8791), (0.8, 1, 1.3764), (0.995, 4, 4.6041),
])
def test_t_quantiles_match_the_printed_table(p: float, df: int, table: float) -> None:
    assert t_quantile(p, df) == pytest.approx(table, abs=5e-5)
    assert t_quantile(1 - p, df) == pytest.approx(-table, abs=5e-5)


def test_t_quantile_tends_to_the_normal_and_is_the_cdf_inverse() -> None:
    assert t_quantile(0.975, 100_000) == pytest.approx(1.959964, abs=1e-4)
    assert t_quantile(0.5, 3) == pytest.approx(0.0, abs=1e-9)
    assert t_cdf(t_quantile(0.9, 7), 7) == pytest.approx(0.9, abs=1e-10)


def test_t_with_one_degree_of_freedom_is_cauchy() -> None:
    # t_1 is the Cauchy distribution: F(t) = 1/2 + atan(t) / pi.
    for t in (-3.0, -0.5, 0.0, 1.0, 10.0):
        assert t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)


def test_regularized_beta_at_known_points() -> None:
    # I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 - (1 - x)^b.
    assert regularized_beta(0.3, 1, 1) == pytest.approx(0.3)
    assert regularized_beta(0.6, 2.5, 1) == pytest.approx(0.6 ** 2.5)
    assert regularized_beta(0.2, 1, 3) == pytest.approx(1 - 0.8 ** 3)
    assert regularized_beta(0.0, 2, 2) == 0.0 and regularized_beta(1.0, 2, 2) == 1.0


@pytest.mark.parametrize(("p", "df"), [(0.0, 3), (1.0, 3), (0.9, 0)])
def test_t_quantile_refuses_what_has_none(p: float, df: int) -> None:
    with pytest.raises(ValueError):
        t_quantile(p, df)


def test_pooled_spread_keeps_each_groups_own_mean() -> None:
    # Group 1: mean 1, squares 1 + 1 = 2; group 2: mean 2, squares 1 + 0 + 1 = 2; the single value carries none.
    # s^2 = 4 / (1 + 2), df = 3.
    spread = pooled_spread([[0.0, 2.0], [1.0, 2.0, 3.0], [5.0]])
    assert spread == Spread(math.sqrt(4 / 3), 3, 2, 5)


def test_cells_of_different_speeds_pool_without_their_gap_counting_as_noise() -> None:
    slow, fast = log_values([100.0, 102.0]), log_values([1000.0, 1020.0])
    # Each: ln 1.02 apart, squares 2 (ln 1.02 / 2)^2; s^2 = (ln 1.02)^2 / 2 per group, pooled the same.
    assert pooled_spread([slow, fast]).sd == pytest.approx(math.log(1.02) / math.sqrt(2))


def test_no_group_of_two_has_no_spread() -> None:
    assert pooled_spread([[1.0], [], [2.0]]) is None
    assert log_values([0.0, -1.0, math.e]) == [1.0]


def test_cv_is_the_spread_as_a_share_of_the_speed() -> None:
    assert Spread(math.log(1.05), 4, 2, 6).cv == pytest.approx(0.05)


def test_min_detectable_effect_by_hand() -> None:
    # se = 0.1; the 2 + 2 new starts join the pool: df 10 + 1 + 1 = 12, t_{12, 0.975} + t_{12, 0.8} = 2.17881 + 0.87261
    # = 3.05142: exp(0.305142) - 1 = 0.35682.
    spread = Spread(0.1, 10, 5, 15)
    assert standard_error(spread, 2, 2) == pytest.approx(0.1)
    assert min_detectable_effect(spread, 2, 2) == pytest.approx(0.35682, abs=1e-5)
    # More starts, a smaller effect: 8 a side halves se, on df 10 + 7 + 7 = 24 (2.06390 + 0.85686 = 2.92076).
    assert min_detectable_effect(spread, 8, 8) == pytest.approx(math.exp(2.92076 * 0.05) - 1, abs=1e-5)
    # From a standard error and its degrees of freedom as they are: t_{10} = 2.22814 + 0.87906 = 3.10720.
    assert detectable(0.1, 10) == pytest.approx(0.36441, abs=1e-5)


def test_a_model_of_one_degree_of_freedom_is_read_with_the_starts_that_will_join_it() -> None:
    # An H100 serving class of 2 starts (df 1, s 0.1709): read on df 1 alone, t_{1, 0.975} + t_{1, 0.8} = 12.7062 +
    # 1.3764 priced 3 starts a side at exp(14.0826 x 0.1709 x sqrt(2/3)) - 1 = 6.13, a 613 % change. Those starts bring
    # the verdict's df to 1 + 2 + 2 = 5: exp((2.57058 + 0.91954) x 0.1709 x sqrt(2/3)) - 1 = 0.628.
    spread = Spread(0.1709, 1, 1, 2)
    assert min_detectable_effect(spread, 3, 3) == pytest.approx(math.exp(3.49012 * 0.1709 * math.sqrt(2 / 3)) - 1, abs=1e-4)
    assert min_detectable_effect(spread, 3, 3) == pytest.approx(0.628, abs=1e-3)
    # One new start a side adds nothing: the model's df as it is.
    assert min_detectable_effect(spread, 1, 1) == pytest.approx(detectable(0.1709 * math.sqrt(2), 1))


def test_method_class_is_draft_or_none() -> None:
    assert method_class(None) == "none" and method_class("dflash") == "draft"


def test_a_class_is_the_cells_gpu_kind_backend_graph_mode_draft_or_none_and_mode() -> None:
    assert NoiseClass.of("H200", "FLASHINFER", "PIECEWISE", "draft_model", "offline", None) == (
        "H200", "FLASHINFER", "PIECEWISE", "draft", "offline", None)
    # Clients count only when serving; a baseline is "none".
    assert NoiseClass.of("H200", "FLASH_ATTN", "FULL", None, "offline", 4).concurrency is None
    assert NoiseClass.of("H200", "FLASH_ATTN", "FULL", None, "serve", 4) == ("H200", "FLASH_ATTN", "FULL", "none", "serve", 4)
    assert NoiseClass.of("H200", "FLASH_ATTN", "FULL", "ngram", "offline", None) != NoiseClass.of(
        "H200", "FLASHINFER", "FULL", "ngram", "offline", None)


def test_fewest_holding_counts_the_largest_groups_that_hold_a_share() -> None:
    # 10 of 16: the largest alone holds 10 / 16 >= half.
    assert fewest_holding([10, 2, 2, 2]) == 1
    # 14.2 + 14.1 of 30: the first alone is 47 %, the two 94 %.
    assert fewest_holding([0.5, 14.2, 1.2, 14.1]) == 2
    # As spread as one another: half of 8 equal groups is 4 of them.
    assert fewest_holding([1.0] * 8) == 4
    assert fewest_holding([0.0, 0.0]) == 0 and fewest_holding([]) == 0


def test_uneven_starts_flags_a_start_whose_rounds_spread_far_beyond_the_others() -> None:
    # Five rounds each (df 4): alike, and one start with 100 times the others' squares. Its share x = 100 / 105 of
    # D = 24: 1 - I_x(2, 10) is about 1e-12, far under 0.01 / 6.
    alike = [(5, 1.0)] * 6
    assert not uneven_starts(alike)
    assert uneven_starts([*alike[:5], (5, 100.0)])
    assert not uneven_starts([(5, 1.0), (5, 100.0)])  # under three starts: no test
    assert not uneven_starts([(5, 0.0)] * 4)  # no spread


def test_uneven_starts_flags_starts_drawn_alike_about_alpha_of_the_time() -> None:
    # Seeded: 400 stores of 12 starts of 3 to 5 normal rounds each, every start the same spread.
    rng = random.Random(3)
    flagged = 0
    for _ in range(400):
        terms = [group_terms([rng.gauss(0, 0.05) for _ in range(rng.choice((3, 5)))]) for _ in range(12)]
        flagged += uneven_starts(terms)
    assert flagged <= 0.02 * 400, flagged  # about 1 % expected (Bonferroni: at most)
