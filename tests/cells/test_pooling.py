"""A cell's repeats pooled into what the verdicts read, through the service's storing and pooling (tests/samples.py)."""

import pytest

from app.cells import identity, pooling
from app.cells.pooling import PooledCell
from app.models import Job, utcnow
from app.results import service as results
from app.schemas.cell import CellResult, Resolved
from tests.factories import cell_result
from tests.results.test_request_acceptance import REQUESTS
from tests.samples import pooled


def _result(tokens_per_s: float, accepted: int, rounds: list[tuple[float, int]] = ()) -> CellResult:  # type: ignore[assignment]
    body = cell_result(tokens_per_s=tokens_per_s, accepted=accepted)
    body["rounds"] = [{"seconds": s, "output_tokens": t, "num_requests": 2} for s, t in rounds]
    return CellResult.model_validate(body)


def test_one_value_per_engine_start_and_summed_counters() -> None:
    # Repeat 1's rounds (100 and 105 tok/s) are summarised by its median; repeat 2 has no rounds: 95 tok/s.
    found = pooled([_result(102.5, 30, [(2.0, 200), (2.0, 210)]), _result(95.0, 30)])
    assert found.tokens_per_s == [102.5, 95.0]
    assert (found.drafts, found.draft_tokens, found.accepted_tokens) == (40, 120, 60)
    assert found.accepted_per_position == (30, 20, 10)


def test_nothing_to_pool_is_refused() -> None:
    with pytest.raises(ValueError, match="no results"):
        pooled([])


def test_starts_pool_their_requests_by_category_and_a_start_without_them_is_not_counted_as_zero() -> None:
    job = Job(spec={})
    cell = PooledCell("build", "gpu", "backend", "graph_mode", "ngram", identity.variant(job.spec), "")
    recorded = CellResult.model_validate(cell_result(fingerprints="abcd") | {"requests": REQUESTS})
    for result in (recorded, recorded, CellResult.model_validate(cell_result())):
        pooling.add_requests(cell, results.result_row(job, result, Resolved(), created_at=utcnow()).request_acceptance)
    assert cell.recorded_starts == 2 and cell.requests is not None
    qa = {c.category: c for c in cell.categories}["qa"]
    # Two starts of two qa requests each, 10 of 15 accepted apiece.
    assert (qa.requests, qa.accepted, qa.draft_tokens) == (4, 40, 60)
    assert cell.requests.rate_bins == [0, 0, 0, 4, 0, 0, 4, 0, 0, 0]


def test_starts_count_where_vllm_turned_async_scheduling_off_and_rows_never_read_count_nowhere() -> None:
    job = Job(spec={})
    draft = PooledCell("build", "gpu", "backend", "graph_mode", "draft_model", identity.variant(job.spec), "")
    base = PooledCell("build", "gpu", "backend", "graph_mode", None, identity.variant(job.spec), "")
    result = CellResult.model_validate(cell_result())
    for cell, offs in ((draft, (True, True, None)), (base, (False, None))):
        for index, off in enumerate(offs):
            row = results.result_row(job, result, Resolved(async_scheduling_off=bool(off)), created_at=utcnow())
            row.async_scheduling_off = off  # None: a row stored before migration 0025, not read again
            pooling.add(cell, row, job_id=index)
    assert (draft.async_off, draft.async_kept, base.async_off, base.async_kept) == (2, 0, 0, 1)
    assert pooling.scheduler_differs(draft, base) and not pooling.scheduler_differs(draft, None)
    # Both without it, or a baseline whose rows were never read: nothing to say.
    assert not pooling.scheduler_differs(draft, draft)
    base.async_kept = 0
    assert not pooling.scheduler_differs(draft, base)
