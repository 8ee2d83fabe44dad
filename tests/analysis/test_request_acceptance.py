"""app/analysis/request_acceptance.py: sums by category, the cluster interval over requests, pooling and the checks,
on hand-built requests with hand-computed answers."""

import math
from types import SimpleNamespace

import pytest

from app.analysis import request_acceptance as ra
from app.analysis.acceptance import cluster_ratio_se
from app.analysis.counters import counter_problems
from app.analysis.intervals import Z_95, wilson_interval


def request(category, drafts, tokens, accepted, positions):
    return SimpleNamespace(category=category, num_drafts=drafts, num_draft_tokens=tokens, num_accepted_tokens=accepted,
                           accepted_per_position=positions)


# Two "qa" requests, k = 3: (a, t, d) = (1, 2, 1) and (3, 4, 2); one "coding" request that drafted nothing.
QA = [request("qa", 1, 2, 1, [1, 0, 0]), request("qa", 2, 4, 3, [2, 1, 0])]
IDLE = request("coding", 0, 0, 0, [0, 0, 0])


def test_the_cluster_error_of_a_ratio_from_its_sums_alone() -> None:
    # Units (y, x) = (1, 2), (3, 4): R = 4/6, residuals 1 - 4/3 = -1/3 and 3 - 8/3 = 1/3, their squares 2/9;
    # se^2 = 2/1 * 2/9 / 6^2 = 1/81.
    assert cluster_ratio_se(2, 4, 6, 1 + 9, 2 + 12, 4 + 16) == pytest.approx(1 / 9)
    assert cluster_ratio_se(1, 1, 2, 1, 2, 4) == 0.0  # one unit: no spread to estimate
    assert cluster_ratio_se(3, 3, 6, 3, 6, 12) == 0.0  # every unit at the same ratio


def test_requests_sum_by_category_with_their_squares_and_bins() -> None:
    kept = ra.summarise([*QA, IDLE])
    assert kept is not None
    qa = kept.sums("qa")
    assert (qa.requests, qa.num_drafts, qa.num_draft_tokens, qa.num_accepted_tokens) == (2, 3, 6, 4)
    assert qa.accepted_per_position == [3, 1, 0]
    assert (qa.accepted_sq, qa.accepted_x_draft_tokens, qa.draft_tokens_sq, qa.accepted_x_drafts, qa.drafts_sq) == (
        10, 14, 20, 7, 5)
    # Rates 1/2 and 3/4: bins [0.5, 0.6) and [0.7, 0.8); the idle request has no rate.
    assert kept.rate_bins == [0, 0, 0, 0, 0, 1, 0, 1, 0, 0] and kept.no_drafts == 1 and kept.over == 0
    assert kept.sums("coding").requests == 1
    # Stored as one list per category: the sums, then the positions.
    assert kept.to_json()["categories"]["qa"] == [2, 3, 6, 4, 10, 14, 20, 7, 5, 3, 1, 0]
    assert ra.from_json(kept.to_json()) == kept


def test_a_result_without_per_request_counts_is_not_recorded_rather_than_zero() -> None:
    older = SimpleNamespace(category=None, num_drafts=4, num_draft_tokens=None, num_accepted_tokens=2,
                            accepted_per_position=None)
    assert ra.summarise([older, older]) is None
    assert ra.summarise([]) is None and ra.from_json(None) is None and ra.pool([]) is None


def test_a_category_interval_takes_the_request_as_the_unit() -> None:
    found = ra.category_acceptance("qa", ra.summarise(QA).sums("qa"))
    assert found is not None and found.requests == 2
    # Rate 4/6 +- 1.96/9 (the cluster error above), widened to hold Wilson's for 4 of 6.
    wilson_low, wilson_high = wilson_interval(4, 6)
    assert found.rate == pytest.approx(2 / 3)
    assert found.rate_low == pytest.approx(min(wilson_low, 2 / 3 - Z_95 / 9))
    assert found.rate_high == pytest.approx(max(wilson_high, 2 / 3 + Z_95 / 9))
    # Length 1 + 4/3. Over (a, d) = (1, 1), (3, 2): residuals -1/3, 1/3, se^2 = 2 * 2/9 / 9, se = 2/9. Per draft:
    # positions [3, 1, 0] of 3 drafts, E[X] = 4/3, E[X^2] = (1*3 + 3*1) / 3 = 2, se = sqrt((2 - 16/9) / 3) = 0.2722,
    # the larger one.
    half = Z_95 * max(2 / 9, math.sqrt((2 - 16 / 9) / 3))
    assert (found.length, found.length_low, found.length_high) == pytest.approx((7 / 3, 7 / 3 - half, 7 / 3 + half))


def test_starts_pool_by_adding_their_sums() -> None:
    one, two = ra.summarise(QA[:1]), ra.summarise([QA[1], IDLE])
    assert ra.pool([one, two]) == ra.summarise([*QA, IDLE])
    # A start of k = 2 beside one of k = 3: positions zero-padded.
    short = ra.summarise([request("qa", 1, 2, 1, [1, 0])])
    assert ra.pool([short, ra.summarise(QA)]).sums("qa").accepted_per_position == [4, 1, 0]
    assert [c.category for c in ra.by_category(ra.pool([one, two]))] == ["qa"]  # coding drafted nothing


def test_requests_that_disagree_with_the_runs_counters_are_flagged() -> None:
    totals = SimpleNamespace(num_drafts=3, num_draft_tokens=6, num_accepted_tokens=4, accepted_per_position=[3, 1, 0])
    kept = ra.summarise(QA)
    assert ra.request_problems(kept, totals) == []
    assert counter_problems(totals, k=3, method="ngram", requests=kept) == []
    lost = ra.summarise(QA[:1])
    assert ra.request_problems(lost, totals) == [
        "requests count 1 drafts in all, the run's counters 3",
        "requests count 2 draft tokens in all, the run's counters 6",
        "requests count 1 accepted tokens in all, the run's counters 4",
        "requests accepted [1, 0, 0] per position in all, the run's counters [3, 1, 0]",
    ]
    over = ra.summarise([request("qa", 1, 1, 2, [1, 1, 0])])
    assert over.over == 1 and sum(over.rate_bins) == 0
    problems = counter_problems(SimpleNamespace(num_drafts=1, num_draft_tokens=1, num_accepted_tokens=2,
                                                accepted_per_position=[1, 1, 0]), k=3, method="ngram", requests=over)
    assert "1 request accepted more tokens than drafted" in problems
    assert ra.category_acceptance("qa", over.sums("qa")) is None
