"""The consistency check of vLLM's spec-decode counters: hand-computed cases, each broken rule in its own words, and
every real vLLM result stored under tests/data (H200 and CPU) passing it."""

import json
from pathlib import Path

import pytest

from app.analysis.acceptance import derive
from app.analysis.counters import counter_problems
from app.schemas.cell import CellResult, SpecDecodeCounters

DATA = Path(__file__).resolve().parents[1] / "data"


def counters(drafts: int, tokens: int, accepted: int, positions: list[int]) -> SpecDecodeCounters:
    # model_construct: the schema refuses a position above the drafts, which a row stored before it may hold.
    return SpecDecodeCounters.model_construct(num_drafts=drafts, num_draft_tokens=tokens, num_accepted_tokens=accepted,
                                              accepted_per_position=positions)


# 1000 drafts of k=3 tokens: 800 accepted position 1, 600 positions 1-2, 300 all three; 1700 accepted.
GOOD = counters(1000, 3000, 1700, [800, 600, 300])


def test_consistent_counters_break_no_rule_and_their_identities_hold() -> None:
    assert counter_problems(GOOD, k=3, method="draft_model") == []
    metrics = derive(GOOD, [])
    rates = [rate for rate, _, _ in metrics.per_position]
    # Rule 2: L = 1 + A / D = 1 + 1700 / 1000 = 2.7 = 1 + 0.8 + 0.6 + 0.3.
    assert metrics.mean_acceptance_length == pytest.approx(2.7) == pytest.approx(1 + sum(rates))
    # Rules 2 and 3: A / T = 1700 / 3000 is the mean of the three rates, (0.8 + 0.6 + 0.3) / 3.
    assert metrics.acceptance_rate == pytest.approx(1700 / 3000) == pytest.approx(sum(rates) / 3)


def test_a_later_position_accepted_more_than_the_one_before_it() -> None:
    assert counter_problems(counters(1000, 3000, 2512, [900, 800, 812]), k=3) == ["position 3 accepted 812 > position 2's 800"]


def test_positions_that_do_not_add_up_to_the_accepted_tokens() -> None:
    assert counter_problems(counters(1000, 3000, 1650, [800, 600, 300]), k=3) == [
        "positions accepted 1700 in all, not the 1650 accepted tokens"]


def test_draft_tokens_that_are_not_drafts_times_k() -> None:
    assert counter_problems(counters(1000, 2990, 1700, [800, 600, 300]), k=3, method="draft_model") == [
        "2990 draft tokens, not 1000 drafts x 3 (k) = 3000"]
    # Unknown k: nothing to hold the draft tokens against.
    assert counter_problems(counters(1000, 2990, 1700, [800, 600, 300]), k=None) == []


def test_an_ngram_draft_may_be_shorter_than_k_but_not_longer_nor_empty() -> None:
    # tests/data/aa-cpu's first start: 84 drafts, 182 draft tokens at k=3 (a match near the context's end).
    assert counter_problems(counters(84, 182, 21, [21, 0, 0]), k=3, method="ngram") == []
    assert counter_problems(counters(84, 182, 21, [21, 0, 0]), k=3, method="draft_model") == [
        "182 draft tokens, not 84 drafts x 3 (k) = 252"]
    for tokens in (253, 83):
        assert counter_problems(counters(84, tokens, 21, [21, 0, 0]), k=3, method="ngram") == [
            f"{tokens} draft tokens outside 84 drafts x 1 to 3 (k) = 84 to 252"]


def test_a_position_accepted_more_than_the_drafts_or_more_positions_than_k() -> None:
    assert counter_problems(counters(1000, 3000, 1901, [1001, 600, 300]), k=3) == ["position 1 accepted 1001 > the 1000 drafts"]
    assert counter_problems(counters(1000, 3000, 1700, [800, 600, 300, 0]), k=3) == ["4 positions counted, more than k = 3"]


def test_every_broken_rule_is_named_in_order() -> None:
    assert counter_problems(counters(10, 29, 30, [5, 20, 4]), k=3) == [
        "position 2 accepted 20 > position 1's 5", "positions accepted 29 in all, not the 30 accepted tokens",
        "29 draft tokens, not 10 drafts x 3 (k) = 30", "position 2 accepted 20 > the 10 drafts"]


def test_no_counters_and_no_per_position_counts_are_not_problems() -> None:
    assert counter_problems(counters(0, 0, 0, []), k=3) == []  # a baseline, or a run that never drafted
    assert counter_problems(counters(0, 0, 0, [0, 0, 0]), k=3) == []
    # A cell that could not read the per-position counter: only the draft tokens are held against k.
    assert counter_problems(counters(1000, 3000, 1700, []), k=3) == []
    # Counts without drafts are a problem.
    assert counter_problems(counters(0, 3, 0, []), k=3) == ["3 draft tokens, not 0 drafts x 3 (k) = 0"]


def _real_results() -> list[tuple[str, CellResult, int, str]]:
    """Every stored result of real vLLM with counters: the H200 cells (their spec.json beside them) and tests/data/aa-cpu's
    six CPU starts of one ngram cell at k=3 (vLLM 0.32.0; docs/verdicts.md)."""
    found = []
    for path in sorted(DATA.glob("**/cells/*/result.json")):
        speculative = json.loads((path.parent / "spec.json").read_text()).get("speculative")
        result = CellResult.model_validate_json(path.read_text())
        if result.spec_decode is not None:
            found.append((str(path.relative_to(DATA)), result, speculative["num_speculative_tokens"], speculative["method"]))
    for path in sorted((DATA / "aa-cpu").glob("run-*.json")):
        found.append((str(path.relative_to(DATA)), CellResult.model_validate_json(path.read_text()), 3, "ngram"))
    return found


def test_every_real_vllm_result_stored_passes_with_each_of_its_rounds() -> None:
    real = _real_results()
    # 147 H200 results with counters (103 draft_model and 33 dflash at k=3; bestk-8b's draft_model at k=1, 2 and 4, 11 of
    # them), 16 of the H100 (draft_model at k=3, 2026-12-05), 16 of the H100's serving line (draft_model at k=1, 2 and 4,
    # tests/data/h100-2026-12-05b and -05c) and the six CPU ngram starts.
    assert len(real) == 185 and {method for *_, method in real} == {"draft_model", "dflash", "ngram"}
    for name, result, k, method in real:
        assert counter_problems(result.spec_decode, k=k, method=method) == [], name
        for r in result.rounds:
            assert r.spec_decode is None or counter_problems(r.spec_decode, k=k, method=method) == [], name
    # Not vacuous: a real result with two positions' counts swapped breaks rule 1.
    name, result, k, method = next(item for item in real if len(item[1].spec_decode.accepted_per_position) >= 2 and
                                   item[1].spec_decode.accepted_per_position[0] > item[1].spec_decode.accepted_per_position[1])
    first, second, *rest = result.spec_decode.accepted_per_position
    swapped = counters(result.spec_decode.num_drafts, result.spec_decode.num_draft_tokens,
                       result.spec_decode.num_accepted_tokens, [second, first, *rest])
    assert counter_problems(swapped, k=k, method=method) == [f"position 2 accepted {first} > position 1's {second}"]
