"""A cell's repeats pooled into what the verdicts read."""

import pytest

from app.analysis.samples import pooled
from app.schemas.cell import CellResult
from tests.factories import cell_result


def _result(tokens_per_s: float, accepted: int, rounds: list[tuple[float, int]] = ()) -> CellResult:  # type: ignore[assignment]
    body = cell_result(tokens_per_s=tokens_per_s, accepted=accepted)
    body["rounds"] = [{"seconds": s, "output_tokens": t, "num_requests": 2} for s, t in rounds]
    return CellResult.model_validate(body)


def test_rounds_of_every_repeat_and_summed_counters() -> None:
    # Repeat 1: rounds of 200 tokens in 2 s and 210 in 2 s; repeat 2 has no rounds: its 95 tok/s counts once.
    found = pooled([_result(100.0, 30, [(2.0, 200), (2.0, 210)]), _result(95.0, 30)])
    assert found.tokens_per_s == [100.0, 105.0, 95.0]
    assert (found.drafts, found.draft_tokens, found.accepted_tokens) == (40, 120, 60)
    assert found.accepted_per_position == (30, 20, 10)


def test_nothing_to_pool_is_refused() -> None:
    with pytest.raises(ValueError, match="no results"):
        pooled([])
