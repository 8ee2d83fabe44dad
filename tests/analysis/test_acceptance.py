import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.analysis.acceptance import NO_DRAFTS, derive, lossless_share, speedup
from app.analysis.intervals import wilson_interval
from app.schemas.cell import MeasuredRequest, SpecDecodeCounters

# 10 drafts of 3 tokens, 24 accepted: 9 at position 0, 8 at 1, 7 at 2.
COUNTERS = SpecDecodeCounters(num_drafts=10, num_draft_tokens=30, num_accepted_tokens=24, accepted_per_position=[9, 8, 7])


def request(drafts: int | None, accepted: int | None) -> MeasuredRequest:
    return MeasuredRequest(num_output_tokens=17, fingerprint="f", num_drafts=drafts, num_accepted_tokens=accepted)


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


# Per draft: P(X >= 1, 2, 3) = .9, .8, .7, so E[X] = 2.4, E[X^2] = 1(.9) + 3(.8) + 5(.7) = 6.8,
# Var = 6.8 - 2.4^2 = 1.04, se = sqrt(1.04 / 10) = 0.322490, half = 1.959964 x se = 0.632069.
PER_DRAFT_HALF = 0.632069


def test_length_interval_from_the_counters_alone_is_per_draft_and_clipped_at_k_plus_one():
    metrics = derive(COUNTERS, [])
    assert metrics.mean_acceptance_length_low == pytest.approx(3.4 - PER_DRAFT_HALF, abs=1e-6)
    assert metrics.mean_acceptance_length_high == 4.0  # 3.4 + 0.632 is past 1 + k


def test_requests_that_agree_add_no_width():
    # Both requests accept 12 tokens in 5 drafts: residuals 12 - 2.4 x 5 = 0, so the cluster term is 0.
    metrics = derive(COUNTERS, [request(5, 12), request(5, 12)])
    assert metrics.mean_acceptance_length_low == pytest.approx(3.4 - PER_DRAFT_HALF, abs=1e-6)


def test_requests_that_differ_widen_the_interval_by_the_ratio_estimators_error():
    # Residuals a - 2.4 d: 3, -1.2, -1.8; sum of squares 13.68; x 3/2 = 20.52; sqrt / 10 = 0.452990.
    metrics = derive(COUNTERS, [request(5, 15), request(3, 6), request(2, 3)])
    assert metrics.mean_acceptance_length_low == pytest.approx(3.4 - 1.959964 * 0.452990, abs=1e-5)


def test_rounds_are_the_cluster_units_when_there_are_two_or_more():
    rounds = [
        SpecDecodeCounters(num_drafts=5, num_draft_tokens=15, num_accepted_tokens=15, accepted_per_position=[5, 5, 5]),
        SpecDecodeCounters(num_drafts=5, num_draft_tokens=15, num_accepted_tokens=9, accepted_per_position=[4, 3, 2]),
    ]
    # Residuals 15 - 12 = 3 and 9 - 12 = -3; 18 x 2 = 36; sqrt / 10 = 0.6.
    metrics = derive(COUNTERS, [request(5, 12), request(5, 12)], rounds)
    assert metrics.mean_acceptance_length_low == pytest.approx(3.4 - 1.959964 * 0.6, abs=1e-5)


def test_units_that_do_not_add_up_to_the_counters_are_not_used():
    # A warm-up leak: the requests count 30 accepted, the counters 24.
    metrics = derive(COUNTERS, [request(5, 15), request(5, 15)])
    assert metrics.mean_acceptance_length_low == pytest.approx(3.4 - PER_DRAFT_HALF, abs=1e-6)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=1, max_value=6).flatmap(
        lambda k: st.tuples(
            st.just(k),
            st.lists(st.integers(min_value=0, max_value=50), min_size=k, max_size=k),
            st.integers(min_value=1, max_value=5000),
            st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), max_size=12),
        )
    )
)
def test_every_interval_holds_its_estimate(case) -> None:
    """The bug this pins: an H200 cell's length interval was empty and a seeded one lay beside its estimate."""
    k, per_position, extra_drafts, units = case
    per_position = sorted(per_position, reverse=True)
    drafts = per_position[0] + extra_drafts
    counters = SpecDecodeCounters(num_drafts=drafts, num_draft_tokens=k * drafts,
                                  num_accepted_tokens=sum(per_position), accepted_per_position=per_position)
    requests = [request(min(d, drafts), min(a, d * k)) for a, d in units]
    metrics = derive(counters, requests)
    assert metrics.acceptance_rate_low <= metrics.acceptance_rate <= metrics.acceptance_rate_high
    assert metrics.mean_acceptance_length_low <= metrics.mean_acceptance_length <= metrics.mean_acceptance_length_high
    assert metrics.mean_acceptance_length_low >= 1.0 and metrics.mean_acceptance_length_high <= 1.0 + k
    for rate, low, high in metrics.per_position:
        assert low <= rate <= high


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
