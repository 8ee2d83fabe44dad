import pytest

from app.analysis.intervals import wilson_interval


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
