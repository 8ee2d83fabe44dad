"""Faults on PostgreSQL: the database restarted under load, a worker killed mid-cell, a late result.

- The database restarts while worker processes claim and complete: the client retries, the pool
  reconnects (pool_pre_ping), every job ends succeeded with exactly one result.
- ``kill -9`` of a worker in the middle of a real vLLM CPU cell: its cell dies with it, the
  service's stalled-job check returns the job once the worker's lease lapses, and another worker
  completes it; the dead worker's attempt leaves nothing behind.
- A worker that reports after losing its lease gets 409, and the newer result stands.
"""

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import psycopg
import pytest

from app.config import Settings
from app.schemas.cell import JobOutcome
from app.schemas.worker import BuildInfo, RegisterRequest
from runners.client import JobLost, ServiceClient
from runners.worker import Build, Worker
from tests import procs
from tests.conftest import AUTH, PG_ADMIN_URL, TOKEN
from tests.live import serve
from tests.pg import Fleet, fake_outcome, job_rows, register_build, result_rows, submit
from tests.vllm_fixtures import CPU_ENGINE_ARGS

pytestmark = pytest.mark.pg
REPO = Path(__file__).resolve().parents[2]


# --- the database restarted under load ------------------------------------------------------


def _pg_version() -> str:
    versions = sorted(os.listdir("/etc/postgresql"), key=lambda v: [int(p) for p in v.split(".") if p.isdigit()])
    assert versions, "no PostgreSQL cluster under /etc/postgresql"
    return versions[-1]


def _pg_ctl(action: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", _pg_version(), "main", action],
        capture_output=True, text=True, timeout=120,
    )


def _pg_up(timeout_s: float = 60) -> None:
    """Start the cluster if it is down and wait until it answers."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with psycopg.connect(PG_ADMIN_URL, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            _pg_ctl("start")
            time.sleep(1)


def _succeeded(url: str) -> int:
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1), connect_timeout=5) as conn:
        return conn.execute("SELECT count(*) FROM jobs WHERE state = 'succeeded'").fetchone()[0]


@pytest.mark.timeout(600)
def test_database_restart_under_load_loses_and_duplicates_nothing(pg_url: str, dataset) -> None:
    jobs_total, workers = 300, 4
    # The lease only matters for a claim whose answer was lost with the database: it comes back soon.
    settings = Settings(database_url=pg_url, token=TOKEN, lease_seconds=20, stall_check_seconds=2, rate_limit_per_minute=0)
    try:
        with serve(settings) as server:
            register_build(server)
            submit(server, dataset, repeats=jobs_total // 10)
            fleet = Fleet(server, workers, work_s=0.05)
            fleet.start()
            # Restart once about a third of the jobs are done, while the rest are being claimed.
            deadline = time.monotonic() + 300
            while (done := _succeeded(pg_url)) < jobs_total // 3:
                assert time.monotonic() < deadline, f"only {done} jobs done before the restart"
                time.sleep(0.2)
            restart = _pg_ctl("restart")
            assert restart.returncode == 0, restart.stderr
            after_restart = _succeeded(pg_url)
            reports = fleet.collect(timeout_s=400)
    finally:
        _pg_up()

    assert [r.error for r in reports if r.error] == []
    assert done < jobs_total and after_restart < jobs_total, "the restart came after the load, not under it"
    jobs = job_rows(pg_url)
    assert len(jobs) == jobs_total
    assert Counter(state for state, _, _ in jobs.values()) == {"succeeded": jobs_total}
    # Exactly one result per job: a report retried across the restart never stored a second one.
    results = Counter(job_id for job_id, _ in result_rows(pg_url))
    assert set(results) == set(jobs) and max(results.values()) == 1
    # Every job appears in some worker's claim log. A job is only claimed twice when its first
    # lease ran out (the answer to the first claim or report was lost in the restart).
    claims = Counter(job_id for r in reports for job_id, _ in r.claimed)
    assert set(claims) == set(jobs)
    assert all(claims[job_id] <= attempts for job_id, (_, attempts, _) in jobs.items())
    twice = sorted(job_id for job_id, n in claims.items() if n > 1)
    refused = sorted(job_id for r in reports for job_id in r.refused)
    print(f"\nrestart after {done} of {jobs_total} jobs; claimed twice: {twice}; reports refused (409): {refused}")


# --- a late result after the lease moved on -------------------------------------------------


def test_a_result_after_the_lease_expired_gets_409_and_the_newer_stands(pg_url: str, dataset) -> None:
    # B must still hold its lease after A's three refused calls: on 2026-12-05, with the 2-core host busy, they took
    # over 2 s and B's own lease lapsed too. 5 s leaves room; A sleeps past it all the same.
    lease = 5.0
    settings = Settings(database_url=pg_url, token=TOKEN, lease_seconds=lease, stall_check_seconds=0.5, rate_limit_per_minute=0)
    with serve(settings) as server:
        register_build(server)
        sweep_id = submit(server, dataset, repeats=1)
        a, b = ServiceClient(server, TOKEN, retry_for_s=10), ServiceClient(server, TOKEN, retry_for_s=10)
        try:

            def register(name: str, client: ServiceClient) -> int:
                request = RegisterRequest(name=name, host="test", gpu_kinds=["cpu"], builds=[BuildInfo(label="fake-build")])
                return client.register(request).id

            worker_a, worker_b = register("a", a), register("b", b)
            first = a.claim(worker_a)
            assert first is not None and first.attempt == 1
            time.sleep(lease + 1.0)  # A goes quiet: no heartbeat, its lease lapses and the service requeues the job

            # B takes it: the second attempt.
            second = b.claim(worker_b)
            assert second is not None and (second.job_id, second.attempt) == (first.job_id, 2)
            # A wakes up while B holds the job: its heartbeat says stop, its log and result are refused.
            assert a.heartbeat(worker_a, [first.job_id]) == [first.job_id]
            with pytest.raises(JobLost):
                a.upload_log(first.job_id, "stale log from A\n")
            with pytest.raises(JobLost):
                a.complete(first.job_id, JobOutcome.model_validate(fake_outcome(0)))
            # B reports: accepted.
            b.upload_log(second.job_id, "log from B\n")
            b.complete(second.job_id, JobOutcome.model_validate(fake_outcome(1)))
            # A tries again after B finished (the client's own retry, say): still 409.
            with pytest.raises(JobLost):
                a.complete(first.job_id, JobOutcome.model_validate(fake_outcome(0)))
        finally:
            a.close()
            b.close()

        job = httpx.get(f"{server}/api/v1/jobs/{first.job_id}").json()
        assert (job["state"], job["attempts"], job["worker_id"]) == ("succeeded", 2, worker_b)
        [row] = httpx.get(f"{server}/api/v1/results", params={"sweep_id": sweep_id}).json()
        assert row["job_id"] == first.job_id and row["tokens_per_s"] == 2.0  # B's (slot 1), not A's 1.0
        assert httpx.get(f"{server}/api/v1/jobs/{first.job_id}/log").text == "log from B\n"
    assert result_rows(pg_url) == [(first.job_id, 2.0)]


# --- kill -9 of a worker in the middle of a real vLLM cell ----------------------------------

VLLM_BUILD = "vllm-cpu-kill"
VLLM_STARTED = "Initializing a V1 LLM engine"


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wait_for(predicate, timeout_s: float, what: str, poll_s: float = 1.0):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout_s:.0f} s waiting for {what}"
        time.sleep(poll_s)


def _get(server: str, path: str, **params) -> httpx.Response:
    return httpx.get(f"{server}{path}", params=params, timeout=30)


@pytest.mark.vllm
@pytest.mark.timeout(1200)
def test_a_worker_killed_mid_cell_has_its_job_requeued_and_finished_by_another(
    pg_url: str, vllm_python: Path, tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    # The lease leaves room for a heartbeat held up 18 s while the cell's engine started on two busy cores
    # (seen at 15 s: the healthy worker B lost its job).
    lease, heartbeat = 40.0, 4
    settings = Settings(database_url=pg_url, token=TOKEN, lease_seconds=lease, stall_check_seconds=1, rate_limit_per_minute=0)
    with serve(settings) as server:
        # Worker A: the real CLI in its own session, so its whole process group can be killed.
        a_log = (tmp_path / "worker-a.log").open("wb")
        worker_a = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "worker", "--server", server, "--token", TOKEN,
             "--build", f"{VLLM_BUILD}={vllm_python}", "--gpu-kind", "cpu", "--heartbeat", str(heartbeat),
             "--name", "worker-a", "--quiet"],
            cwd=REPO, stdout=a_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            env=os.environ | {"PYTHONUNBUFFERED": "1"},
        )
        cell_pids: list[int] = []
        try:
            _wait_for(lambda: any(b["label"] == VLLM_BUILD for b in _get(server, "/api/v1/builds").json()),
                      120, "worker A to register its build")
            [a_id] = [w["id"] for w in _get(server, "/api/v1/workers").json() if w["name"] == "worker-a"]
            body = {
                "name": "kill-9", "build": VLLM_BUILD, "model": str(tiny_model),
                "workload": {"dataset": str(prompts), "num_prompts": 4, "max_tokens": 16, "warmup_prompts": 1},
                "speculative": [{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3,
                                 "prompt_lookup_min": 1}],
                "backends": ["CPU_ATTN"], "graph_modes": ["NONE"], "gpu_kinds": ["cpu"],
                "engine_args": dict(CPU_ENGINE_ARGS), "timeout_s": 600,
            }
            created = httpx.post(f"{server}/api/v1/sweeps", json=body, headers=AUTH, timeout=30)
            assert created.status_code == 201, created.text
            [job] = created.json()["jobs"]
            job_id = job["job_id"]

            # Mid-cell: A holds the job and the log it streams shows vLLM's engine starting.
            _wait_for(lambda: _get(server, f"/api/v1/jobs/{job_id}").json()["state"] == "running", 60, "A's claim")
            _wait_for(lambda: VLLM_STARTED in _get(server, f"/api/v1/jobs/{job_id}/log").text, 300,
                      "vLLM to start in A's cell (its log)")
            job = _get(server, f"/api/v1/jobs/{job_id}").json()
            assert (job["state"], job["worker_id"], job["attempts"]) == ("running", a_id, 1)

            # kill -9 of A's process group only: the cell's own group dies with A (runners/lifeline.py).
            cell_pids = sorted(procs.children(worker_a.pid))
            assert cell_pids, "worker A has no cell process"
            _killpg(worker_a.pid)
            worker_a.wait(timeout=30)
            assert worker_a.returncode == -signal.SIGKILL
            killed_at = time.monotonic()
        finally:
            if worker_a.poll() is None:
                _killpg(worker_a.pid)
            for pid in cell_pids:
                _killpg(pid)
            a_log.close()

        # Worker B, in-process. Right after the kill the job is still held by A: nothing to claim.
        client = ServiceClient(server, TOKEN, retry_for_s=60)
        try:
            worker_b = Worker(client, builds=[Build(VLLM_BUILD, vllm_python)], gpu_kinds=["cpu"],
                              workdir=tmp_path / "worker-b", heartbeat_s=heartbeat, echo=False, name="worker-b")
            b_id = worker_b.register()
            assert client.claim(b_id) is None
            assert _get(server, f"/api/v1/jobs/{job_id}").json()["state"] == "running"
            # Then B polls; once A's lease lapsed the service's own check requeues the job, and B takes it.
            ran = _wait_for(lambda: worker_b.run(max_jobs=1, exit_when_idle=True), lease + 60, "B to get the job")
            requeued_after = time.monotonic() - killed_at
        finally:
            client.close()
        assert ran == 1
        assert requeued_after >= lease - heartbeat - 1, f"the job came back {requeued_after:.0f} s after the kill"

        job = _get(server, f"/api/v1/jobs/{job_id}").json()
        assert (job["state"], job["attempts"], job["worker_id"]) == ("succeeded", 2, b_id), job
        [row] = _get(server, "/api/v1/results", sweep_id=created.json()["id"]).json()
        assert row["job_id"] == job_id and row["output_tokens"] == 4 * 16 and row["tokens_per_s"] > 0
        assert row["num_draft_tokens"] > 0 and row["resolved_backend"] == "CPU_ATTN"
        log = _get(server, f"/api/v1/jobs/{job_id}/log").text
        assert "cell result written" in log  # B's log replaced A's partial one
    # The killed cell left no process behind.
    assert not [pid for pid in cell_pids if procs.alive(pid)]
    assert result_rows(pg_url) == [(job_id, row["tokens_per_s"])]
