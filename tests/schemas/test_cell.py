"""The cell's result contract (app/schemas/cell.py): schema 6's passes and harness, and older results as they were."""

import pytest
from pydantic import ValidationError

from app.schemas.cell import CELL_SCHEMA_VERSION, MAX_PASSES, CellResult, Round

# A schema-5 result as runners/cell.py wrote it before passes: one round, no harness.
SCHEMA_5 = {
    "schema_version": 5, "import_s": 6.0, "engine_start_s": 20.0, "warmup_s": 1.0, "generation_s": 2.0,
    "num_requests": 6, "prompt_tokens": 60, "output_tokens": 192, "tokens_per_s": 192.0, "requests_per_s": 6.0,
    "output_fingerprint": "f" * 64, "wall_s": 30.0,
    "rounds": [{"seconds": 2.0, "output_tokens": 384, "num_requests": 12, "spec_decode": None}],
}


def round_of(passes: list[tuple[float, int]], seconds: float | None = None, tokens: int | None = None) -> dict:
    return {
        "seconds": sum(s for s, _ in passes) if seconds is None else seconds,
        "output_tokens": sum(t for _, t in passes) if tokens is None else tokens,
        "num_requests": 6 * len(passes),
        "passes": [{"seconds": s, "output_tokens": t} for s, t in passes],
    }


def test_a_rounds_passes_must_add_up_to_it() -> None:
    Round.model_validate(round_of([(0.3, 192), (0.25, 192), (0.26, 192)]))
    # Float sums of the pass times are let through within a millionth of the round.
    Round.model_validate(round_of([(0.3, 192), (0.25, 192)], seconds=0.55 + 3e-7))
    with pytest.raises(ValidationError, match="passes' 384 output tokens are not the round's 400"):
        Round.model_validate(round_of([(0.3, 192), (0.25, 192)], tokens=400))
    with pytest.raises(ValidationError, match=r"passes' 0\.55 s are not the round's 0\.6 s"):
        Round.model_validate(round_of([(0.3, 192), (0.25, 192)], seconds=0.6))
    with pytest.raises(ValidationError, match=f"at most {MAX_PASSES} items"):
        Round.model_validate(round_of([(0.001, 1)] * (MAX_PASSES + 1)))


def test_a_schema_6_result_keeps_its_passes_and_harness() -> None:
    result = CellResult.model_validate({
        **SCHEMA_5, "schema_version": 6, "rounds": [round_of([(1.0, 192), (1.0, 192)])],
        "harness": {"gc_freeze": True, "gc_pause": True, "gc_collections": [3, 0, 0],
                    "clock": "clock_gettime(CLOCK_MONOTONIC)", "forked": True},
    })
    assert result.schema_version == 6
    assert [p.output_tokens for p in result.rounds[0].passes] == [192, 192]
    assert result.harness is not None and result.harness.forked and result.harness.gc_collections == [3, 0, 0]
    assert result.model_dump(mode="json")["harness"]["clock"] == "clock_gettime(CLOCK_MONOTONIC)"


def test_a_schema_7_request_keeps_its_category_and_counters_even_when_they_disagree() -> None:
    request = {"num_output_tokens": 32, "fingerprint": "f", "category": "coding", "num_drafts": 2, "num_draft_tokens": 3,
               "num_accepted_tokens": 4, "accepted_per_position": [2, 2, 0]}
    result = CellResult.model_validate({**SCHEMA_5, "schema_version": 7, "requests": [request]})
    assert result.schema_version == 7
    # More accepted than drafted is a finding for the counter check, not a refusal.
    assert result.model_dump(mode="json")["requests"] == [request]


def test_an_older_result_reads_and_dumps_as_it_was() -> None:
    """The service accepts every schema's results; a stored one exports and imports back without fields it never had."""
    result = CellResult.model_validate(SCHEMA_5)
    assert result.harness is None and result.rounds[0].passes == []
    dumped = result.model_dump(mode="json")
    assert "harness" not in dumped and "passes" not in dumped["rounds"][0]
    assert "energy" not in dumped and "energy_j" not in dumped["rounds"][0]
    assert CellResult.model_validate(dumped) == result


def test_a_schema_8_result_keeps_each_rounds_joules_and_why_there_are_none() -> None:
    result = CellResult.model_validate({
        **SCHEMA_5, "schema_version": 8, "rounds": [{**round_of([(1.0, 192)]), "energy_j": 96.5}],
        "energy": {"joules": 96.5, "gpus": ["GPU-a", "GPU-b"], "reason": None},
    })
    assert result.schema_version == 8 and CELL_SCHEMA_VERSION == 9
    assert result.rounds[0].energy_j == 96.5 and result.energy is not None and result.energy.gpus == ["GPU-a", "GPU-b"]
    unread = CellResult.model_validate({**SCHEMA_5, "energy": {"joules": None, "reason": "not reported (the CPU engine)"}})
    assert unread.energy is not None and unread.energy.reason == "not reported (the CPU engine)"
