"""An eager and a graphed cell for the alarm to judge: pooled by hand, or run through the API as a build's ngram cell,
each side accepting a chosen count of its draft tokens."""

from collections import Counter
from pathlib import Path

from fastapi.testclient import TestClient

from app.cells.identity import Variant
from app.cells.pooling import PooledCell
from app.enums import JobState
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body

DRAFT_TOKENS = 6000


def pooled_cell(mode: str, method: str | None, accepted: int, tokens: int, variant: str = "v", build: str = "b1") -> PooledCell:
    """A cell of H200 FLASH_ATTN in graph mode ``mode`` that accepted ``accepted`` of ``tokens`` draft tokens."""
    cell = PooledCell(build, "H200", "FLASH_ATTN", mode, method, Variant(variant, "base", variant, method or "baseline"),
                      method or "baseline", sweep_ids=[1], sweep_names=["s"], job_ids=[len(mode)], states=Counter({JobState.SUCCEEDED: 1}))
    cell.draft_tokens, cell.accepted, cell.drafts = tokens, accepted, tokens // 3
    cell.measured_in[len(mode)] = 1
    return cell


def pair_result(accepted: int) -> dict:
    """A result that accepted ``accepted`` of ``DRAFT_TOKENS`` draft tokens."""
    return cell_result() | {"spec_decode": {"num_drafts": 2000, "num_draft_tokens": DRAFT_TOKENS, "num_accepted_tokens": accepted,
                                            "accepted_per_position": []}}


def graphed_pair(client: TestClient, dataset: Path, build: str, accepted: dict[str, int]) -> int:
    """A sweep of one ngram cell of ``build`` eager and PIECEWISE, one repeat each, accepting ``accepted[mode]`` of
    ``DRAFT_TOKENS``; its id."""
    worker = register_worker(client, builds=[build])
    body = sweep_body(dataset, build=build, repeats=1, graph_modes=["NONE", "PIECEWISE"],
                      speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    sweep = submit(client, body).json()
    for _ in range(2):
        job = claim(client, worker)
        result = pair_result(accepted[job["spec"]["graph_mode"]])
        assert complete(client, job["job_id"], worker, {"result": result}).status_code == 200
    return sweep["id"]
