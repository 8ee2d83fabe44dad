"""Proofs against the PostgreSQL server on this machine: exactly-once claims, faults, late results.

Shared here: a fake worker that runs as a separate process (multiprocessing, spawn) and speaks the
real HTTP protocol through ``runners.client.ServiceClient`` (register, claim, complete), reporting
a tiny result instead of running vLLM, plus helpers to submit work and read the database back.
"""

import multiprocessing as mp
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from app.schemas.cell import CellResult, JobOutcome
from app.schemas.worker import BuildInfo, RegisterRequest
from tests.conftest import AUTH, TOKEN

BUILD = "fake-build"
# Ten speculative configs: ``repeats`` x 10 jobs per sweep (the CPU matrix has one backend and mode).
SPECULATIVE = [{"method": "ngram", "num_speculative_tokens": n, "prompt_lookup_max": 4} for n in range(1, 11)]


@dataclass
class ClaimLog:
    """What one worker process did, sent back to the test through a queue."""

    slot: int
    worker_id: int | None = None
    claimed: list[tuple[int, int]] = field(default_factory=list)  # (job id, attempt)
    completed: list[int] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)  # complete answered 409: the job moved on
    error: str | None = None


def fake_outcome(slot: int) -> dict[str, Any]:
    """A valid, small result; tokens_per_s names the worker process that reported it."""
    result = CellResult(
        engine_start_s=0.0, warmup_s=0.0, generation_s=0.01, num_requests=1, prompt_tokens=1, output_tokens=1,
        tokens_per_s=float(slot + 1), requests_per_s=1.0, output_fingerprint="f",
    )
    return JobOutcome(result=result, exit_code=0).model_dump(mode="json")


def fake_worker(server: str, slot: int, barrier, reports, work_s: float = 0.0, retry_for_s: float = 180.0,
                builds: tuple[str, ...] = (BUILD,)) -> None:
    """Register, wait for the others, then claim and complete until no job is queued or running.

    A 204 alone does not end the loop: a job whose claim answer was lost (the database went away
    after the commit) is still running, held by this worker while it beats; once this worker stops
    beating the service's stalled-job check returns it to the queue.
    """
    from runners.client import JobLost, ServiceClient  # in the child: spawn imports this module afresh

    report = ClaimLog(slot=slot)
    client = ServiceClient(server, TOKEN, retry_for_s=retry_for_s, timeout_s=30)
    try:
        register = RegisterRequest(name=f"fake-{slot}", host="test", gpu_kinds=["cpu"],
                                   builds=[BuildInfo(label=label) for label in builds])
        report.worker_id = client.register(register).id
        barrier.wait(timeout=120)
        outcome = JobOutcome.model_validate(fake_outcome(slot))
        while True:
            job = client.claim(report.worker_id)
            if job is None:
                if not _unfinished(client):
                    break
                time.sleep(0.5)
                continue
            report.claimed.append((job.job_id, job.attempt))
            if work_s:
                time.sleep(work_s)
            try:
                client.complete(job.job_id, outcome)
            except JobLost:
                report.refused.append(job.job_id)
            else:
                report.completed.append(job.job_id)
    except Exception as exc:
        report.error = f"worker {slot}: {type(exc).__name__}: {exc}"
        barrier.abort()
    finally:
        client.close()
        reports.put(report)


def _unfinished(client) -> bool:
    """Whether any job is still queued or running (the service's own view, through the client's retries)."""
    return any(client._call("GET", "/api/v1/jobs", params={"state": state, "limit": 1}).json() for state in ("queued", "running"))


class Fleet:
    """``n`` fake worker processes (spawn), released together once all registered."""

    def __init__(self, server: str, n: int, *, work_s: float = 0.0, builds: tuple[str, ...] = (BUILD,)) -> None:
        ctx = mp.get_context("spawn")
        self.barrier = ctx.Barrier(n + 1)
        self.reports = ctx.Queue()
        self.procs = [
            ctx.Process(target=fake_worker, args=(server, slot, self.barrier, self.reports, work_s, 180.0, builds),
                        daemon=True)
            for slot in range(n)
        ]

    def start(self) -> float:
        for proc in self.procs:
            proc.start()
        try:
            self.barrier.wait(timeout=180)
        except threading.BrokenBarrierError:
            pass  # a worker failed before the start; its report says why
        return time.monotonic()

    def collect(self, timeout_s: float) -> list[ClaimLog]:
        deadline = time.monotonic() + timeout_s
        reports = []
        try:
            for _ in self.procs:  # drain before join, or a full pipe deadlocks
                reports.append(self.reports.get(timeout=max(1.0, deadline - time.monotonic())))
        finally:
            for proc in self.procs:
                proc.join(timeout=10)
                if proc.is_alive():
                    proc.kill()
        return reports


def register_build(server: str, *labels: str) -> None:
    """Sweeps name a build some worker registered: register one placeholder worker for ``labels`` (``BUILD``)."""
    body = {"name": "seed", "host": "test", "gpu_kinds": ["cpu"], "builds": [{"label": b} for b in labels or (BUILD,)]}
    httpx.post(f"{server}/api/v1/workers", json=body, headers=AUTH, timeout=30).raise_for_status()


def submit(server: str, dataset: Path, *, repeats: int, name: str = "pg-proof", **more: Any) -> int:
    """A CPU sweep of ``10 x repeats`` jobs (of ``BUILD``, unless ``more`` says otherwise); returns its id."""
    body = {
        "name": name, "build": BUILD, "model": "/models/fake", "workload": {"dataset": str(dataset), "num_prompts": 1},
        "speculative": SPECULATIVE, "backends": ["CPU_ATTN"], "graph_modes": ["NONE"], "gpu_kinds": ["cpu"],
        "repeats": repeats, **more,
    }
    response = httpx.post(f"{server}/api/v1/sweeps", json=body, headers=AUTH, timeout=120)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def libpq_url(sqlalchemy_url: str) -> str:
    return sqlalchemy_url.replace("postgresql+psycopg://", "postgresql://", 1)


def job_rows(sqlalchemy_url: str) -> dict[int, tuple[str, int, int | None]]:
    """job id -> (state, attempts, worker id), straight from the database."""
    with psycopg.connect(libpq_url(sqlalchemy_url)) as conn:
        return {row[0]: (row[1], row[2], row[3]) for row in conn.execute("SELECT id, state, attempts, worker_id FROM jobs")}


def result_rows(sqlalchemy_url: str) -> list[tuple[int, float]]:
    """(job id, tokens_per_s) of every stored result."""
    with psycopg.connect(libpq_url(sqlalchemy_url)) as conn:
        return [(row[0], row[1]) for row in conn.execute("SELECT job_id, tokens_per_s FROM results")]
