"""Exactly once: 1,000 jobs, 8 worker processes over HTTP, on PostgreSQL.

The service runs for real (uvicorn over a fresh PostgreSQL database). Each worker is a separate
process speaking the real protocol (register, claim, complete) through ``ServiceClient``, with a
tiny fake result instead of vLLM. Afterwards every job must have succeeded once: one claim, one
attempt, one result, reported by the process that claimed it; none claimed twice, none lost.
"""

import time
from collections import Counter

import pytest

from app.config import Settings
from tests.conftest import TOKEN
from tests.live import serve
from tests.pg import Fleet, job_rows, register_build, result_rows, submit

pytestmark = [pytest.mark.pg, pytest.mark.timeout(600)]

JOBS = 1000
WORKERS = 8


def test_every_job_succeeds_exactly_once(pg_url: str, dataset) -> None:
    # A lease far longer than the run: any second claim of a job would be a queue bug, not a requeue.
    settings = Settings(database_url=pg_url, token=TOKEN, lease_seconds=3600, rate_limit_per_minute=0)
    with serve(settings) as server:
        register_build(server)
        submit(server, dataset, repeats=JOBS // 10)
        fleet = Fleet(server, WORKERS)
        started = fleet.start()
        reports = fleet.collect(timeout_s=420)
        wall = time.monotonic() - started

    assert [r.error for r in reports if r.error] == []
    assert len(reports) == WORKERS
    jobs = job_rows(pg_url)
    assert len(jobs) == JOBS

    # The claim logs of all processes: no job twice (within or across processes), none missing.
    claims = Counter(job_id for r in reports for job_id, _ in r.claimed)
    assert [job_id for job_id, n in claims.items() if n > 1] == []
    assert set(claims) == set(jobs)
    assert all(attempt == 1 for r in reports for _, attempt in r.claimed)
    assert [r.refused for r in reports if r.refused] == []

    # The database agrees: every job succeeded on its first attempt, held by the process that claimed it.
    claimed_by = {job_id: r.worker_id for r in reports for job_id, _ in r.claimed}
    assert Counter(state for state, _, _ in jobs.values()) == {"succeeded": JOBS}
    assert all(attempts == 1 for _, attempts, _ in jobs.values())
    assert {job_id: worker for job_id, (_, _, worker) in jobs.items()} == claimed_by

    # One result per job, and it is the claimer's (tokens_per_s carries the process's slot).
    results = result_rows(pg_url)
    assert len(results) == JOBS
    assert Counter(job_id for job_id, _ in results).most_common(1)[0][1] == 1
    slot_of = {r.worker_id: r.slot for r in reports}
    assert all(tps == slot_of[claimed_by[job_id]] + 1 for job_id, tps in results)

    # Every process took part (the queue spread the work), reported for the record.
    per_worker = sorted(len(r.claimed) for r in reports)
    assert per_worker[0] > 0, per_worker
    print(f"\n{JOBS} jobs, {WORKERS} worker processes: {wall:.1f} s ({JOBS / wall:.0f} jobs/s); claims per worker {per_worker}")
