"""Paired runs on PostgreSQL under concurrent claimers: two paired sweeps of 100 jobs each, 8 worker processes over
HTTP. Every job runs once, and each pair's two jobs run on one worker, one right after the other."""

from collections import Counter, defaultdict

import psycopg
import pytest

from app.config import Settings
from tests.conftest import TOKEN
from tests.live import serve
from tests.pg import BUILD, Fleet, job_rows, libpq_url, register_build, submit

pytestmark = [pytest.mark.pg, pytest.mark.timeout(600)]

HEAD = "fake-build-pr"
WORKERS = 8


def test_each_pair_runs_back_to_back_on_one_worker_with_eight_claiming_at_once(pg_url: str, dataset) -> None:
    settings = Settings(database_url=pg_url, token=TOKEN, lease_seconds=3600, rate_limit_per_minute=0)
    with serve(settings) as server:
        register_build(server, BUILD, HEAD)
        base = submit(server, dataset, repeats=10, name="base")
        submit(server, dataset, repeats=10, name="head", build=HEAD, paired_with=base)
        fleet = Fleet(server, WORKERS, builds=(BUILD, HEAD))
        fleet.start()
        reports = fleet.collect(timeout_s=420)

    assert [r.error for r in reports if r.error] == []
    jobs = job_rows(pg_url)
    assert len(jobs) == 200 and Counter(state for state, _, _ in jobs.values()) == {"succeeded": 200}
    claims = Counter(job_id for r in reports for job_id, _ in r.claimed)
    assert set(claims) == set(jobs) and set(claims.values()) == {1}
    with psycopg.connect(libpq_url(pg_url)) as conn:
        pair_of = dict(conn.execute("SELECT id, pair_id FROM jobs").fetchall())
    where = defaultdict(list)  # pair -> (worker, position in its claims)
    for report in reports:
        for position, (job_id, _) in enumerate(report.claimed):
            where[pair_of[job_id]].append((report.worker_id, position))
    assert None not in where and len(where) == 100
    assert all(len(at) == 2 and at[0][0] == at[1][0] and abs(at[0][1] - at[1][1]) == 1 for at in where.values())
    assert sum(1 for r in reports if r.claimed) > 1  # the pairs spread over the workers
