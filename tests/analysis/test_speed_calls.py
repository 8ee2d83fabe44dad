"""Tokens/s called by the noise model and by pairs of starts (app.analysis.verdicts), figures by hand."""

import math

import pytest

from app.analysis.noise import Spread, paired_aa_spread
from app.analysis.verdicts import (
    Change,
    Rule,
    history_threshold,
    model_change,
    paired_change,
    paired_spread,
    speed_change,
    speed_sentence,
    throughput_change,
)

H200_BASELINE = Spread(0.012329, 4, 2, 6)  # the stored H200 A/A's baselines (tests/noise/test_h200.py)
H200_DRAFT = Spread(0.094232, 4, 2, 6)  # its draft_model cells


def test_the_model_calls_a_ten_percent_drop_from_three_starts_a_side_that_the_cpu_rule_leaves_undecided() -> None:
    # d = ln 0.9 = -0.10536, se = 0.012329 sqrt(2/3) = 0.010067, t_{4, 0.975} = 2.77645: high 0.9 exp(0.027951) = 0.9255.
    found = model_change([1000.0] * 3, [900.0] * 3, H200_BASELINE)
    assert found.change is Change.WORSE and found.rule is Rule.NOISE_MODEL and found.ratio.ratio == pytest.approx(0.9)
    assert found.ratio.high == pytest.approx(0.9 * math.exp(2.77645 * 0.010067), rel=1e-4) and found.ratio.high < 1
    assert found.ratio.confidence == pytest.approx(0.95)
    # (2.77645 + 0.94096) x 0.010067 = 0.037423: exp - 1 = 3.81 %.
    assert found.detectable == pytest.approx(0.03813, abs=1e-4)
    # The rule without a model, without history, needs 7 starts a side or 3.26x: the same starts are undecided there.
    assert throughput_change([1000.0] * 3, [900.0] * 3, threshold=history_threshold([])).change is Change.UNDECIDED


def test_a_change_within_the_minimum_effect_is_unchanged_even_when_the_interval_excludes_1() -> None:
    # 3 % down: the interval [0.9433, 0.9975] excludes 1, but 3 % is under the 5 % minimum.
    found = model_change([1000.0] * 3, [970.0] * 3, H200_BASELINE)
    assert found.ratio.high < 1 and found.change is Change.UNCHANGED


def test_a_large_move_inside_the_noise_is_undecided() -> None:
    # The draft class's noise, one start a side: se = 0.094232 sqrt(2) = 0.13326, half-width 0.37, so 10 % up holds 1.
    found = model_change([1000.0], [1100.0], H200_DRAFT)
    assert found.ratio.low < 1 < found.ratio.high and found.change is Change.UNDECIDED
    assert model_change([1000.0], [2000.0], H200_DRAFT).change is Change.BETTER


def test_the_model_needs_a_speed_on_each_side() -> None:
    with pytest.raises(ValueError, match="each side needs a positive speed"):
        model_change([0.0], [1.0], H200_DRAFT)


def test_two_pairs_pool_twice_the_models_variance_with_their_own() -> None:
    # Differences 0.1, 0.3: squares 0.02 on 1 df. Model s = 0.05 on 10 df: 10 x 2 x 0.0025 = 0.05.
    # s_d^2 = (0.05 + 0.02) / 11 = 0.0063636: s_d = 0.079772 on 11 df.
    found = paired_spread([0.1, 0.3], Spread(0.05, 10, 5, 15))
    assert found.sd == pytest.approx(0.079772, abs=1e-6) and found.df == 11
    # One pair and the model: 2 s^2 alone, on its 10 df.
    assert paired_spread([0.1], Spread(0.05, 10, 5, 15)).sd == pytest.approx(0.05 * math.sqrt(2))


def test_three_pairs_stand_alone_without_aa_pairs() -> None:
    # Squares 0.02 on 2 df: sd 0.1 whatever the unpaired model says (its spread holds the drift pairs remove).
    assert paired_spread([0.1, 0.2, 0.3], Spread(0.05, 10, 5, 15)) == Spread(pytest.approx(0.1), 2, 1, 3)
    assert paired_spread([0.1, 0.2, 0.3], None).sd == pytest.approx(0.1) and paired_spread([0.1], None) is None


def test_aa_pairs_are_the_prior_of_a_pairs_difference_when_the_class_has_them() -> None:
    # The class's A/A pairs: s_0 = 0.05 on 10 df (their differences, drift gone); the pairs' own squares 0.02 on 2.
    # s_d^2 = (10 x 0.0025 + 0.02) / 12 = 0.00375: s_d = 0.061237, narrower than from 2 s^2 of unpaired starts.
    found = paired_spread([0.1, 0.2, 0.3], Spread(0.05, 10, 5, 15), Spread(0.05, 10, 10, 20))
    assert found.sd == pytest.approx(0.061237, abs=1e-6) and found.df == 12
    assert found.sd < paired_spread([0.1, 0.2, 0.3], None).sd
    assert paired_aa_spread([0.1, -0.1, 0.2]) == Spread(pytest.approx(math.sqrt(0.02)), 3, 3, 6)
    assert paired_aa_spread([]) is None


def test_pairs_by_hand() -> None:
    # With A/A pairs s_0 = 0.05 on 10 df: s_d = sqrt((0.025 + 0.02) / 12) = 0.061237; se = 0.061237 / sqrt(3) = 0.035355,
    # t_{12, 0.975} = 2.17881: exp(0.2 +- 0.077032) = [1.13081, 1.31925].
    pairs = [(1000.0, 1000.0 * math.exp(x)) for x in (0.1, 0.2, 0.3)]
    found = paired_change(pairs, Spread(0.05, 10, 5, 15), paired=Spread(0.05, 10, 10, 20))
    assert found.rule is Rule.PAIRED and found.pairs == 3 and found.change is Change.BETTER
    assert found.ratio.ratio == pytest.approx(math.exp(0.2))
    assert (found.ratio.low, found.ratio.high) == pytest.approx((1.13081, 1.31925), abs=1e-4)
    # (2.17881 + 0.87261) x 0.035355 = 0.107884: exp - 1 = 11.39 %.
    assert found.detectable == pytest.approx(0.11392, abs=1e-4)


def test_each_pair_keeps_its_own_level() -> None:
    # Three pairs at three levels of the host (500 to 2000 tok/s), each 10 % slower: d_i = ln 0.9 every time, no
    # spread of their own; with the A/A pairs' s_0 = 0.01 (30 df): s_d^2 = 30 x 0.0001 / 32, se = 0.0055902 on 32 df.
    pairs = [(1000.0, 900.0), (2000.0, 1800.0), (500.0, 450.0)]
    found = paired_change(pairs, Spread(0.5, 30, 10, 40), paired=Spread(0.01, 30, 30, 60))
    assert found.change is Change.WORSE and found.ratio.ratio == pytest.approx(0.9)
    assert found.ratio.high == pytest.approx(0.9 * math.exp(2.03693 * 0.0055902), rel=1e-4)
    # The unpaired starts' model (s = 0.5: the levels apart) would have hidden it; the starts alone call it.
    assert model_change([1000.0, 2000.0, 500.0], [900.0, 1800.0, 450.0], Spread(0.5, 30, 10, 40)).change is Change.UNDECIDED


def test_two_pairs_without_a_model_are_a_paired_t_test() -> None:
    # d = -0.1, -0.3: mean -0.2, sd 0.141421 on 1 df, se 0.1, t_{1, 0.975} = 12.7062: the interval holds 1.
    pairs = [(1000.0, 1000.0 * math.exp(-0.1)), (1000.0, 1000.0 * math.exp(-0.3))]
    found = paired_change(pairs, None)
    assert found.change is Change.UNDECIDED and found.ratio.low == pytest.approx(math.exp(-0.2 - 1.27062), rel=1e-4)
    assert paired_change(pairs[:1], None) is None


def test_speed_change_takes_the_first_rule_that_applies() -> None:
    base, head = [1000.0] * 3, [900.0] * 3
    pairs = list(zip(base, head, strict=True))
    assert speed_change(base, head, pairs=pairs, noise=H200_BASELINE).rule is Rule.PAIRED
    assert speed_change(base, head, noise=H200_BASELINE).rule is Rule.NOISE_MODEL
    # One pair and no model says nothing from the pairs: the rule without a model.
    assert speed_change(base, head, pairs=pairs[:1]).rule is Rule.NO_MODEL
    assert speed_change([1000.0 + i for i in range(7)], [900.0 + i for i in range(7)]).rule is Rule.MANN_WHITNEY
    assert speed_change(base, head, history=[1000.0, 1010.0, 990.0, 1000.0, 1005.0]).rule is Rule.HISTORY


def test_the_sentence_says_what_could_have_been_seen() -> None:
    # s = 0.03 on 20 df, 3 a side: se = 0.024495; t_{20, 0.975} = 2.08596: ratio 0.97 [0.9217, 1.0208];
    # (2.08596 + 0.85996) x 0.024495 = 0.072160: could detect 7 %.
    found = model_change([1000.0] * 3, [970.0] * 3, Spread(0.03, 20, 5, 25))
    assert speed_sentence(found) == "tokens/s 0.97x [0.92, 1.02] (noise model, 95 %): could detect 7 % or more; none seen"
    slower = model_change([1000.0] * 3, [700.0] * 3, Spread(0.03, 20, 5, 25))
    assert speed_sentence(slower).endswith("could detect 7 % or more; slower")
    pairs = paired_change([(1000.0, 700.0)] * 2, Spread(0.03, 20, 5, 25))
    assert speed_sentence(pairs).startswith("tokens/s 0.70x [") and "(2 pairs of starts, 95 %)" in speed_sentence(pairs)
    # Without a model: the ratio and the rule, and nothing about what could have been seen.
    plain = throughput_change([1000.0] * 3, [900.0] * 3, threshold=history_threshold([]))
    assert speed_sentence(plain) == "tokens/s 0.90x [0.90, 0.90] (no model)"
