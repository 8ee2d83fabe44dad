import pytest

from app.analysis.acceptance import NO_DRAFTS, derive, lossless_share, speedup
from app.analysis.intervals import wilson_interval
from app.schemas.cell import RequestOutcome, SpecDecodeCounters

# 10 drafts of 3 tokens, 24 accepted: 9 at position 0, 8 at 1, 7 at 2.
COUNTERS = SpecDecodeCounters(num_drafts=10, num_draft_tokens=30, num_accepted_tokens=24, accepted_per_position=[9, 8, 7])


def request(drafts: int | None, accepted: int | None) -> RequestOutcome:
    return RequestOutcome(num_output_tokens=17, fingerprint="f", num_drafts=drafts, num_accepted_tokens=accepted)


def test_point_estimates_follow_vllm_formulas():
    metrics = derive(COUNTERS, [])
    assert metrics.acceptance_rate == pytest.approx(24 / 30)  # 0.8
    assert metrics.mean_acceptance_length == pytest.approx(1 + 24 / 10)  # 3.4
    assert [rate for rate, _, _ in metrics.per_position] == pytest.approx([0.9, 0.8, 0.7])


def test_acceptance_rate_interval_is_wilson_over_draft_tokens():
    metrics = derive(COUNTERS, [])
    assert (metrics.acceptance_rate_low, metrics.acceptance_rate_high) == wilson_interval(24, 30)


def test_per_position_intervals_are_wilson_over_drafts():
    # Position 1: 8 of 10, the hand-computed case of test_intervals: (0.490162, 0.943318).
    rate, low, high = derive(COUNTERS, []).per_position[1]
    assert rate == 0.8
    assert low == pytest.approx(0.490162, abs=1e-6)
    assert high == pytest.approx(0.943318, abs=1e-6)


def test_length_interval_from_requests_with_identical_ratios_is_a_point():
    # Both requests accept 12 tokens in 5 drafts: every resample gives 1 + 24/10 = 3.4.
    metrics = derive(COUNTERS, [request(5, 12), request(5, 12)])
    assert metrics.mean_acceptance_length_low == pytest.approx(3.4)
    assert metrics.mean_acceptance_length_high == pytest.approx(3.4)


def test_length_interval_brackets_the_point_when_requests_differ():
    metrics = derive(COUNTERS, [request(5, 15), request(3, 6), request(2, 3)])
    assert metrics.mean_acceptance_length_low < 3.4 < metrics.mean_acceptance_length_high


@pytest.mark.parametrize(
    "requests",
    [[], [request(5, 12), request(None, None)], [request(5, None)], [request(0, 0), request(0, 0)]],
    ids=["no requests", "one without counts", "accepted missing", "no request drafted"],
)
def test_no_length_interval_without_per_request_counts(requests):
    metrics = derive(COUNTERS, requests)
    assert metrics.mean_acceptance_length == pytest.approx(3.4)
    assert metrics.mean_acceptance_length_low is None
    assert metrics.mean_acceptance_length_high is None


def test_baseline_and_draftless_runs_have_no_metrics():
    assert derive(None, []) == NO_DRAFTS
    assert derive(SpecDecodeCounters(num_drafts=0, num_draft_tokens=0, num_accepted_tokens=0), []) == NO_DRAFTS
    assert NO_DRAFTS.acceptance_rate is None and NO_DRAFTS.per_position == ()


def test_more_accepted_than_drafted_is_an_error():
    with pytest.raises(ValueError):
        derive(SpecDecodeCounters(num_drafts=1, num_draft_tokens=3, num_accepted_tokens=4), [])


def test_speedup_is_the_throughput_ratio():
    assert speedup(150.0, 100.0) == 1.5
    with pytest.raises(ValueError):
        speedup(150.0, 0.0)


def test_lossless_share_pairs_requests_by_position():
    assert lossless_share(["a", "b", "c", "d"], ["a", "x", "c", "d"]) == 0.75
    # Same outputs in another order are not paired: position matters.
    assert lossless_share(["a", "b"], ["b", "a"]) == 0.0


@pytest.mark.parametrize(("mine", "theirs"), [(["a"], ["a", "b"]), ([], [])])
def test_lossless_share_needs_equal_non_empty_runs(mine, theirs):
    with pytest.raises(ValueError):
        lossless_share(mine, theirs)
