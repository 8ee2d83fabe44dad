"""The SQL queue on SQLite and PostgreSQL: atomic claims, stalled jobs of dead workers, the attempt cap, cancel."""

from datetime import datetime, timedelta

import pytest
from sqlalchemy import select

from app.enums import JobState
from app.jobs import queue
from app.models import Job, Sweep, Worker, utcnow
from tests.jobs.concurrency import LEASE, claim_concurrently


def _sweep(session, n: int, *, gpu_kind: str = "cpu", build: str = "b", priority: int = 0, max_attempts: int = 3) -> Sweep:
    sweep = Sweep(name="q", build=build, spec={"build": build}, priority=priority)
    for i in range(n):
        sweep.jobs.append(
            Job(cell_index=i, repeat=0, build=build, gpu_kind=gpu_kind, backend="CPU_ATTN", graph_mode="NONE",
                method="ngram", spec={}, config_hash="h", priority=priority, max_attempts=max_attempts)
        )
    session.add(sweep)
    session.flush()
    return sweep


def _worker(session, name: str = "w", heard: datetime | None = None) -> int:
    worker = Worker(name=name, host="h", gpu_kinds=["cpu"], builds=["b"], last_heartbeat_at=heard or utcnow())
    session.add(worker)
    session.flush()
    return worker.id


def _beat(session, worker_id: int, at: datetime) -> None:
    session.get(Worker, worker_id).last_heartbeat_at = at


def _claim(session, worker_id: int, **kw):
    args = {"gpu_kinds": ["cpu"], "builds": ["b"], "lease_seconds": LEASE} | kw
    return queue.claim(session=session, worker_id=worker_id, **args)


def test_claim_takes_only_matching_gpu_kind_and_build(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        _sweep(s, 1, gpu_kind="H200")
        _sweep(s, 1, build="other")
        wanted = _sweep(s, 1).jobs[0].id
        w = _worker(s)
    with migrated_sessions.begin() as s:
        job = _claim(s, w)
        assert job.id == wanted and job.state is JobState.RUNNING and job.attempts == 1 and job.worker_id == w
        assert _claim(s, w) is None


def test_claim_prefers_priority_then_age(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        low = _sweep(s, 2).jobs
        high = _sweep(s, 1, priority=10).jobs
        w = _worker(s)
    with migrated_sessions.begin() as s:
        order = [_claim(s, w).id for _ in range(3)]
    assert order == [high[0].id, low[0].id, low[1].id]


def test_concurrent_claims_never_hand_out_a_job_twice(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        _sweep(s, 60)
        workers = [_worker(s, f"w{i}") for i in range(6)]
    claimed = claim_concurrently(
        migrated_sessions, workers, lambda s, w: getattr(_claim(s, w), "id", None)
    )
    assert len(claimed) == 60 and len(set(claimed)) == 60
    with migrated_sessions() as s:
        assert set(s.scalars(select(Job.state))) == {JobState.RUNNING}


def test_a_dead_workers_job_is_requeued_with_its_attempt_counted(migrated_sessions) -> None:
    start = utcnow()
    with migrated_sessions.begin() as s:
        job_id = _sweep(s, 1).jobs[0].id
        first, second = _worker(s, "a", heard=start), _worker(s, "b", heard=start)
    with migrated_sessions.begin() as s:
        _claim(s, first, now=start)
    with migrated_sessions.begin() as s:
        # Alive while its last heartbeat is younger than the lease, however long the cell runs.
        _beat(s, first, start + timedelta(seconds=25))
        assert queue.requeue_stalled(session=s, lease_seconds=30, now=start + timedelta(seconds=50)) == 0
        assert queue.requeue_stalled(session=s, lease_seconds=30, now=start + timedelta(seconds=56)) == 1
    with migrated_sessions.begin() as s:
        _beat(s, second, start + timedelta(seconds=57))
        job = _claim(s, second, now=start + timedelta(seconds=57))
        assert job.id == job_id and job.attempts == 2 and job.worker_id == second
        # The first worker's late report is refused: the newer attempt owns the job.
        with pytest.raises(queue.NotLeasedError):
            queue.hold(session=s, job_id=job_id, worker_id=first, lease_seconds=30, now=start + timedelta(seconds=58))


def test_a_late_result_is_refused_once_the_lease_lapsed_even_before_the_check_ran(migrated_sessions) -> None:
    start = utcnow()
    with migrated_sessions.begin() as s:
        job_id = _sweep(s, 1).jobs[0].id
        w = _worker(s, heard=start)
        _claim(s, w, now=start)
    with migrated_sessions.begin() as s:
        assert queue.hold(session=s, job_id=job_id, worker_id=w, lease_seconds=30, now=start + timedelta(seconds=29)).id == job_id
        with pytest.raises(queue.NotLeasedError, match="lease lapsed"):
            queue.hold(session=s, job_id=job_id, worker_id=w, lease_seconds=30, now=start + timedelta(seconds=31))
        assert s.get(Job, job_id).state is JobState.RUNNING  # the stalled-job check requeues it, not hold


def test_attempt_cap_fails_the_job_instead_of_requeueing(migrated_sessions) -> None:
    now = utcnow()
    with migrated_sessions.begin() as s:
        job_id = _sweep(s, 1, max_attempts=2).jobs[0].id
        w = _worker(s, heard=now)
    for attempt in (1, 2):
        with migrated_sessions.begin() as s:
            _beat(s, w, now)
            assert _claim(s, w, now=now).attempts == attempt
            now += timedelta(seconds=5)
            queue.requeue_stalled(session=s, lease_seconds=1, now=now)
    with migrated_sessions() as s:
        job = s.get(Job, job_id)
        assert job.state is JobState.FAILED and job.attempts == 2 and "died on attempt 2 of 2" in job.error
        assert _claim(s, w) is None


def test_heartbeats_name_the_jobs_to_stop(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        sweep = _sweep(s, 2)
        sweep_id = sweep.id
        w = _worker(s)
    with migrated_sessions.begin() as s:
        a, b = _claim(s, w).id, _claim(s, w).id
    with migrated_sessions.begin() as s:
        assert queue.to_stop(session=s, worker_id=w, job_ids=[a, b]) == []
    with migrated_sessions.begin() as s:
        assert queue.cancel(session=s, sweep_id=sweep_id) == 2
    with migrated_sessions.begin() as s:
        assert queue.to_stop(session=s, worker_id=w, job_ids=[a, b]) == [a, b]
        assert set(s.scalars(select(Job.state))) == {JobState.CANCELLED}


def test_cancel_leaves_finished_jobs_alone(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        sweep = _sweep(s, 3)
        sweep_id = sweep.id
        w = _worker(s)
    with migrated_sessions.begin() as s:
        job = _claim(s, w)
        queue.finish(session=s, job=job, state=JobState.SUCCEEDED)
    with migrated_sessions.begin() as s:
        assert queue.cancel(session=s, sweep_id=sweep_id) == 2
        assert queue.counts_by_state(session=s, sweep_id=sweep_id) == {"succeeded": 1, "cancelled": 2}


def test_finish_refuses_a_non_final_state(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        _sweep(s, 1)
        job = _claim(s, _worker(s))
        with pytest.raises(ValueError, match="not a final state"):
            queue.finish(session=s, job=job, state=JobState.QUEUED)
