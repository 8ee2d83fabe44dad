"""Claim throughput of the SQL job queue with several worker processes, on SQLite and PostgreSQL.

Each worker is a separate process (multiprocessing, spawn) with its own engine, as real workers
are separate machines behind the API. A worker loops the way the service handles a worker's two
requests: one transaction marks the worker alive and claims a job (``app.workers.service.touch`` +
``queue.claim``, committed: a claim counts as a heartbeat), a second one holds and finishes it
(``queue.hold``, which also checks that the worker is alive within ``LEASE_SECONDS``, +
``queue.finish(SUCCEEDED)``, committed), until no job is left.

Every claimed job id is sent back to the parent, which checks that each job was claimed exactly
once (no duplicate, none lost) and that the database agrees; any miss makes the script exit 1.

    .venv/bin/python -m benchmarks.queue_claims --jobs 2000 --workers 4 --pg postgresql://postgres@127.0.0.1:5432/test
"""

import argparse
import multiprocessing as mp
import statistics
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from sqlalchemy import func, insert, select

from app import db
from app.enums import JobState
from app.jobs import queue
from app.models import Job, Sweep, Worker
from app.workers import service as worker_service
from tests import scratchdb

GPU_KIND = "cpu"
BUILD = "b"
# The liveness lease (DRAFTBENCH_LEASE_SECONDS) that queue.hold checks the worker against; each claim renews it.
LEASE_SECONDS = 600.0
MODE = "touch+claim txn, then hold+finish txn"


@dataclass
class WorkerReport:
    """What one worker process sends back: the jobs it claimed and how long each claim took."""

    worker_id: int
    claimed: list[int] = field(default_factory=list)
    claim_ms: list[float] = field(default_factory=list)
    cycle_ms: list[float] = field(default_factory=list)
    ended_at: float = 0.0
    error: str | None = None


@dataclass
class Outcome:
    backend: str
    jobs: int
    workers: int
    wall_s: float
    claim_ms: list[float]
    cycle_ms: list[float]
    duplicates: int
    lost: int
    not_succeeded: int
    errors: list[str]

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.lost or self.not_succeeded or self.errors)


# --- database set-up -------------------------------------------------------------------------


def seed(url: str, *, jobs: int, workers: int) -> list[int]:
    """Migrate, queue ``jobs`` jobs of one sweep and register ``workers`` workers; return worker ids."""
    db.upgrade(url)
    engine = db.make_engine(url)
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            sweep = Sweep(name="bench", build=BUILD, spec={})
            session.add(sweep)
            session.flush()
            session.execute(insert(Job), [_job_row(sweep.id, i) for i in range(jobs)])
            rows = [Worker(name=f"w{i}", host="bench", gpu_kinds=[GPU_KIND], builds=[BUILD]) for i in range(workers)]
            session.add_all(rows)
            session.flush()
            return [w.id for w in rows]
    finally:
        engine.dispose()


def _job_row(sweep_id: int, index: int) -> dict:
    return {
        "sweep_id": sweep_id, "cell_index": index, "repeat": 0, "build": BUILD, "gpu_kind": GPU_KIND,
        "backend": "CPU_ATTN", "graph_mode": "NONE", "method": "ngram", "spec": {"i": index},
        "config_hash": f"{index:064x}", "state": JobState.QUEUED, "priority": 0, "attempts": 0, "max_attempts": 3,
    }


# --- the worker process ----------------------------------------------------------------------


def work(url: str, worker_id: int, barrier, results) -> None:
    """Claim and finish jobs until none is left; report to the parent even when something fails."""
    report = WorkerReport(worker_id=worker_id)
    engine = db.make_engine(url)
    factory = db.make_sessionmaker(engine)
    try:
        with engine.connect():  # open the pooled connection before the clock starts
            pass
        barrier.wait()
        while _claim_and_finish(factory, worker_id, report):
            pass
    except Exception as exc:
        report.error = f"worker {worker_id}: {type(exc).__name__}: {exc}"
        barrier.abort()  # a failure before the start releases everyone at once, not after a timeout
    finally:
        report.ended_at = time.monotonic()
        engine.dispose()
        results.put(report)


def _claim_and_finish(factory, worker_id: int, report: WorkerReport) -> bool:
    """One cycle as a worker does it over HTTP: claim (own transaction), then complete (another)."""
    started = time.perf_counter()
    with db.session_scope(factory) as session:
        worker_service.touch(session=session, worker=worker_service.get(session=session, worker_id=worker_id))
        job = queue.claim(session=session, worker_id=worker_id, gpu_kinds=[GPU_KIND], builds=[BUILD],
                          lease_seconds=LEASE_SECONDS)
        job_id = job.id if job is not None else None
    claimed = time.perf_counter()
    if job_id is None:
        return False
    with db.session_scope(factory) as session:
        held = queue.hold(session=session, job_id=job_id, worker_id=worker_id, lease_seconds=LEASE_SECONDS)
        queue.finish(session=session, job=held, state=JobState.SUCCEEDED)
    done = time.perf_counter()
    report.claimed.append(job_id)
    report.claim_ms.append((claimed - started) * 1000)
    report.cycle_ms.append((done - started) * 1000)
    return True


# --- one run and its checks ------------------------------------------------------------------


def run(backend: str, url: str, *, jobs: int, workers: int) -> Outcome:
    """Seed the database, release the worker processes together, collect and verify their claims."""
    worker_ids = seed(url, jobs=jobs, workers=workers)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(workers + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=work, args=(url, wid, barrier, results)) for wid in worker_ids]
    for proc in procs:
        proc.start()
    try:
        barrier.wait(timeout=120)
    except threading.BrokenBarrierError:
        pass  # a worker failed before the start; its report says why and the run is marked FAIL
    started = time.monotonic()
    reports = [results.get(timeout=600) for _ in procs]  # drain before join, or a full pipe deadlocks
    for proc in procs:
        proc.join()
    wall = max(r.ended_at for r in reports) - started
    return verify(backend, url, reports, jobs=jobs, workers=workers, wall_s=wall)


def verify(backend: str, url: str, reports: list[WorkerReport], *, jobs: int, workers: int, wall_s: float) -> Outcome:
    """Count claims per job across processes and compare with what the database says."""
    counts = Counter(job_id for r in reports for job_id in r.claimed)
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            all_ids = set(conn.scalars(select(Job.id)))
            not_succeeded = conn.scalar(select(func.count()).select_from(Job).where(Job.state != JobState.SUCCEEDED))
    finally:
        engine.dispose()
    return Outcome(
        backend=backend, jobs=jobs, workers=workers, wall_s=wall_s,
        claim_ms=[ms for r in reports for ms in r.claim_ms], cycle_ms=[ms for r in reports for ms in r.cycle_ms],
        duplicates=sum(n - 1 for n in counts.values() if n > 1),
        lost=len(all_ids - set(counts)),
        not_succeeded=not_succeeded or 0,
        errors=[r.error for r in reports if r.error],
    )


# --- output ----------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile: p99 of 2000 claims is a claim that happened, not an interpolation."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def table(outcomes: list[Outcome]) -> str:
    header = ("backend", "workers", "jobs", "wall s", "jobs/s", "claim p50 ms", "claim p99 ms",
              "cycle p50 ms", "cycle p99 ms", "dup", "lost", "check")
    rows = [header] + [
        (o.backend, str(o.workers), str(o.jobs), f"{o.wall_s:.2f}", f"{o.jobs / o.wall_s:.0f}",
         f"{statistics.median(o.claim_ms):.2f}", f"{percentile(o.claim_ms, 99):.2f}",
         f"{statistics.median(o.cycle_ms):.2f}", f"{percentile(o.cycle_ms, 99):.2f}",
         str(o.duplicates), str(o.lost), "ok" if o.ok else "FAIL")
        for o in outcomes
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    notes = [
        f"each worker cycle = {MODE} (two commits, as the service handles claim and complete);",
        "claim = the claim transaction (touch + claim) incl. commit; cycle = claim + finish;",
        "jobs/s = jobs / wall (barrier to last worker done).",
    ]
    return "\n".join([*lines, "", *notes])


def failures(outcomes: list[Outcome]) -> list[str]:
    out = []
    for o in outcomes:
        if o.duplicates or o.lost or o.not_succeeded:
            out.append(f"FAIL {o.backend}: {o.duplicates} duplicate claims, {o.lost} lost jobs, "
                       f"{o.not_succeeded} jobs not succeeded")
        out += [f"FAIL {o.backend}: {e}" for e in o.errors]
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test",
                        help="server (and an existing database to connect to) where a fresh database is made")
    parser.add_argument("--only", choices=["sqlite", "postgresql"])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    outcomes = []
    if args.only in (None, "sqlite"):
        with scratchdb.sqlite() as url:
            outcomes.append(run("sqlite", url, jobs=args.jobs, workers=args.workers))
    if args.only in (None, "postgresql"):
        with scratchdb.postgres(args.pg) as url:
            outcomes.append(run("postgresql", url, jobs=args.jobs, workers=args.workers))
    print(table(outcomes))
    problems = failures(outcomes)
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
