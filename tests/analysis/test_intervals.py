import pytest

from app.analysis.intervals import bootstrap_ratio_interval, wilson_interval


def test_wilson_8_of_10_by_hand():
    # z = 1.959964, z^2 = 3.841459, n = 10, p = 0.8
    # denominator = 1 + z^2/n = 1.3841459
    # centre = (0.8 + z^2/20) / 1.3841459 = 0.9920729 / 1.3841459 = 0.7167402
    # half = z / 1.3841459 * sqrt(0.8 * 0.2 / 10 + z^2/400) = 1.4160140 * sqrt(0.0256036) = 0.2265777
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.7167402 - 0.2265777, abs=1e-6)
    assert high == pytest.approx(0.7167402 + 0.2265777, abs=1e-6)


def test_wilson_none_of_10_starts_at_zero():
    # p = 0: centre = half = (z^2/20) / 1.3841459 = 0.1387664, so (0, 2 * 0.1387664)
    low, high = wilson_interval(0, 10)
    assert low == 0.0
    assert high == pytest.approx(0.2775328, abs=1e-6)


def test_wilson_all_of_10_mirrors_none_of_10():
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(1 - 0.2775328, abs=1e-6)
    assert high == pytest.approx(1.0, abs=1e-12)


def test_wilson_narrows_with_more_trials():
    small = wilson_interval(8, 10)
    large = wilson_interval(800, 1000)
    assert large[1] - large[0] < small[1] - small[0]


@pytest.mark.parametrize(("successes", "trials"), [(0, 0), (1, 0), (-1, 10), (11, 10)])
def test_wilson_rejects_impossible_counts(successes, trials):
    with pytest.raises(ValueError):
        wilson_interval(successes, trials)


def test_bootstrap_identical_ratios_give_a_zero_width_interval():
    # Every request accepts 2 tokens per draft, so every resample's ratio is exactly 2.
    assert bootstrap_ratio_interval([2, 4, 6, 8], [1, 2, 3, 4]) == (2.0, 2.0)


def test_bootstrap_two_units_by_hand():
    # Units (1, 1) and (0, 1): a resample of two draws both (1/4) -> 1, one each (1/2) -> 0.5,
    # the second twice (1/4) -> 0. A quarter of the ratios are 0 and a quarter 1, so the 5 % and
    # 95 % quantiles are 0 and 1.
    assert bootstrap_ratio_interval([1, 0], [1, 1], confidence=0.9) == (0.0, 1.0)


def test_zero_denominator_resamples_are_skipped_not_divided():
    # Pins a division by zero: a resample that draws only the request with no drafts has no ratio.
    # Units (0, 0) and (3, 1): every other resample has ratio 3.
    assert bootstrap_ratio_interval([0, 3], [0, 1], resamples=200) == (3.0, 3.0)


def test_bootstrap_is_reproducible_with_a_seed():
    numerators = [3, 0, 7, 2, 9, 4, 1, 5]
    denominators = [2, 1, 3, 2, 4, 2, 1, 3]
    first = bootstrap_ratio_interval(numerators, denominators, seed=7)
    assert first == bootstrap_ratio_interval(numerators, denominators, seed=7)
    assert first != bootstrap_ratio_interval(numerators, denominators, seed=8)
    low, high = first
    assert low < sum(numerators) / sum(denominators) < high


def test_bootstrap_wider_at_higher_confidence():
    numerators = [3, 0, 7, 2, 9, 4, 1, 5]
    denominators = [2, 1, 3, 2, 4, 2, 1, 3]
    low80, high80 = bootstrap_ratio_interval(numerators, denominators, confidence=0.8)
    low99, high99 = bootstrap_ratio_interval(numerators, denominators, confidence=0.99)
    assert low99 <= low80 and high80 <= high99


@pytest.mark.parametrize(
    ("numerators", "denominators", "options"),
    [
        ([1, 2], [1], {}),
        ([], [], {}),
        ([1, 2], [0, 0], {}),
        ([1], [1], {"resamples": 0}),
        ([1], [1], {"confidence": 1.0}),
    ],
)
def test_bootstrap_rejects_bad_input(numerators, denominators, options):
    with pytest.raises(ValueError):
        bootstrap_ratio_interval(numerators, denominators, **options)
