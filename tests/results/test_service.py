"""One engine start's tokens/s interval as the service makes it from a result, stores it and shows it: over the
passes where the cell kept them (a block bootstrap at 95 %), else the rounds' order statistics at their level."""

import random
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.analysis.fallback import RepeatSpeed, pool_repeats, repeat_interval
from app.analysis.passes import block_bootstrap
from app.analysis.rounds import median_interval
from app.cells import identity
from app.cells.pooling import PooledCell, add
from app.models import Job, utcnow
from app.results.service import result_row, start_throughput
from app.schemas.cell import CellResult, Resolved
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body

TOKENS = 4096


def passes_round(speeds: list[float]) -> dict:
    """A round of passes of TOKENS tokens at ``speeds`` tokens/s, as runners/cell.py writes it (schema 6)."""
    passes = [{"seconds": TOKENS / speed, "output_tokens": TOKENS} for speed in speeds]
    return {"seconds": sum(p["seconds"] for p in passes), "output_tokens": TOKENS * len(speeds),
            "num_requests": 32 * len(speeds), "passes": passes}


def with_passes() -> dict:
    """Five rounds of six passes at about 100 tok/s, the third round's passes slow (0.73x): a run of slow passes."""
    rng = random.Random(3)
    speeds = [100 * (1 + 0.02 * rng.gauss(0, 1)) * (0.73 if 12 <= i < 18 else 1.0) for i in range(30)]
    return {**cell_result(), "schema_version": 6, "rounds": [passes_round(speeds[i:i + 6]) for i in range(0, 30, 6)]}


def rounds_only() -> dict:
    """The same rounds without their passes, as a schema-5 cell reported them."""
    body = with_passes()
    for r in body["rounds"]:
        del r["passes"]
    return {**body, "schema_version": 5}


def test_a_start_with_passes_gets_their_block_bootstrap_and_one_without_its_rounds_interval() -> None:
    kept, older = CellResult.model_validate(with_passes()), CellResult.model_validate(rounds_only())
    interval, passes = start_throughput(kept)
    rounds = median_interval([r.output_tokens / r.seconds for r in kept.rounds])
    boot = block_bootstrap([p.seconds for r in kept.rounds for p in r.passes],
                           [p.output_tokens for r in kept.rounds for p in r.passes], [6] * 5)
    assert boot is not None
    assert passes == 30 and interval.confidence == 0.95 and interval.n == 5
    assert interval.median == rounds.median and interval.median == pytest.approx(boot.value)
    assert (interval.low, interval.high) == (boot.low, boot.high)
    # The slow round is one of five to the order statistics: [min, max] at 93.75 %; the passes see the run.
    assert start_throughput(older) == (rounds, None) and rounds.confidence == 0.9375
    assert interval.low < rounds.median < interval.high


def test_too_few_passes_keep_the_rounds_interval() -> None:
    body = {**cell_result(), "schema_version": 6, "rounds": [passes_round([100.0, 101.0]) for _ in range(3)]}
    result = CellResult.model_validate(body)
    assert start_throughput(result) == (median_interval([r.output_tokens / r.seconds for r in result.rounds]), None)


def test_the_row_stores_the_level_and_one_start_shows_its_interval_as_it_is() -> None:
    """A bootstrap's 95 % interval is carried to 95 % unchanged; a pre-0020 row (no level) is carried from its rounds'."""
    job = Job(spec={})
    row = result_row(job, CellResult.model_validate(with_passes()), Resolved(), created_at=utcnow())
    assert (row.tokens_per_s_level, row.passes, row.rounds) == (0.95, 30, 5)
    cell = PooledCell("b", "cpu", "CPU_ATTN", "NONE", None, identity.variant(job.spec), "")
    add(cell, row, job_id=1)
    cell.speed = pool_repeats(cell.repeats)
    assert cell.tokens_per_s == (row.tokens_per_s, pytest.approx(row.tokens_per_s_low), pytest.approx(row.tokens_per_s_high))
    stored_before = RepeatSpeed(row.tokens_per_s, row.tokens_per_s_low, row.tokens_per_s_high, 5)
    assert repeat_interval(stored_before)[0] < row.tokens_per_s_low  # read as 93.75 %, widened to 95 %


def test_the_results_api_says_each_intervals_level_and_passes(client: TestClient, dataset: Path) -> None:
    worker = register_worker(client)
    body = sweep_body(dataset, repeats=2, speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    sweep = submit(client, body).json()
    for result in (with_passes(), rounds_only()):
        job = claim(client, worker)
        assert complete(client, job["job_id"], worker, {"result": result}).status_code == 200
    kept, older = sorted(client.get("/api/v1/results", params={"sweep_id": sweep["id"]}).json(), key=lambda r: r["job_id"])
    assert (kept["tokens_per_s_level"], kept["passes"], kept["rounds"]) == (0.95, 30, 5)
    assert (older["tokens_per_s_level"], older["passes"], older["rounds"]) == (0.9375, None, 5)
    # One point, two intervals: the passes' bootstrap, and the slowest and fastest of five rounds.
    interval, _ = start_throughput(CellResult.model_validate(with_passes()))
    speeds = [r["output_tokens"] / r["seconds"] for r in rounds_only()["rounds"]]
    assert kept["tokens_per_s"] == older["tokens_per_s"] == interval.median
    assert (kept["tokens_per_s_low"], kept["tokens_per_s_high"]) == pytest.approx((interval.low, interval.high))
    assert (older["tokens_per_s_low"], older["tokens_per_s_high"]) == pytest.approx((min(speeds), max(speeds)))
