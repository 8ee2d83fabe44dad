"""The job queue in SQL: every statement that claims, leases, requeues or cancels a job lives here.

A claim is one ``UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING``: on
PostgreSQL concurrent claimers skip each other's locked rows instead of waiting; on SQLite the
clause is dropped and the write lock taken by ``BEGIN IMMEDIATE`` (see app.db) serialises claims.
The outer ``state = 'queued'`` guard keeps a claim correct even where the lock is missing.

Which job a claim takes, among those the worker can run (GPU kind, build, at most its GPU count):

1. the highest ``priority`` (CI before nightly sweeps);
2. the job needing the most GPUs (a worker started on two GPUs runs the tensor-parallel cells
   that only it can take before the single-GPU ones that every worker can take);
3. fairness between sweeps: the sweep with the fewest running jobs, then the sweep served least
   recently (its latest ``started_at``; never served first), so equal sweeps get claims in turn
   whether there are many workers or one;
4. the oldest job.

The fairness terms are scalar subqueries in ``ORDER BY``: PostgreSQL refuses ``FOR UPDATE`` beside
``GROUP BY`` or aggregates of the locked query itself, not in a subquery, and the lock is taken
``OF jobs`` only. ``ix_jobs_sweep_state`` and ``ix_jobs_sweep_started`` keep each term an index probe.
"""

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import and_, func, select, update
from sqlalchemy.orm import Session, aliased

from app.enums import JobState
from app.models import Job, utcnow


class NotLeasedError(Exception):
    """The worker reported on a job it does not hold (its lease expired, or the job was cancelled)."""

    def __init__(self, job_id: int, worker_id: int) -> None:
        super().__init__(f"job {job_id} is not leased to worker {worker_id}")
        self.job_id = job_id
        self.worker_id = worker_id


def claim(
    *,
    session: Session,
    worker_id: int,
    gpu_kinds: Sequence[str],
    builds: Sequence[str],
    lease_seconds: float,
    gpu_count: int | None = None,
    now: datetime | None = None,
) -> Job | None:
    """Hand the next matching queued job to ``worker_id`` and count the attempt; None when none is left.

    ``gpu_count`` is how many GPUs the worker has free: jobs needing more are left to other
    workers. None puts no limit (callers that route by GPU kind only).
    """
    now = now or utcnow()
    other = aliased(Job)
    running_in_sweep = (
        select(func.count())
        .select_from(other)
        .where(other.sweep_id == Job.sweep_id, other.state == JobState.RUNNING)
        .scalar_subquery()
    )
    sweep_last_served = (
        select(func.max(other.started_at)).where(other.sweep_id == Job.sweep_id).scalar_subquery()
    )
    conditions = [
        Job.state == JobState.QUEUED,
        Job.gpu_kind.in_(list(gpu_kinds)),
        Job.build_label.in_(list(builds)),
        Job.attempts < Job.max_attempts,
    ]
    if gpu_count is not None:
        conditions.append(Job.gpus_needed <= gpu_count)
    candidate = (
        select(Job.id)
        .where(*conditions)
        .order_by(
            Job.priority.desc(),
            Job.gpus_needed.desc(),
            running_in_sweep.asc(),
            sweep_last_served.asc().nulls_first(),
            Job.id,
        )
        .limit(1)
        .with_for_update(skip_locked=True, of=Job)
        .scalar_subquery()
    )
    job_id = session.execute(
        update(Job)
        .where(Job.id == candidate, Job.state == JobState.QUEUED)
        .values(
            state=JobState.RUNNING,
            worker_id=worker_id,
            attempts=Job.attempts + 1,
            lease_expires_at=now + timedelta(seconds=lease_seconds),
            started_at=now,
        )
        .returning(Job.id)
        .execution_options(synchronize_session=False)
    ).scalar_one_or_none()
    if job_id is None:
        return None
    return session.execute(
        select(Job).where(Job.id == job_id).execution_options(populate_existing=True)
    ).scalar_one()


def renew(
    *, session: Session, worker_id: int, job_ids: Sequence[int], lease_seconds: float, now: datetime | None = None
) -> list[int]:
    """Extend the leases of the jobs ``worker_id`` still holds; return those it no longer holds.

    A job missing from the answer's complement was cancelled or requeued: the worker must stop it.
    """
    now = now or utcnow()
    if not job_ids:
        return []
    held = session.scalars(
        update(Job)
        .where(Job.id.in_(list(job_ids)), Job.worker_id == worker_id, Job.state == JobState.RUNNING)
        .values(lease_expires_at=now + timedelta(seconds=lease_seconds))
        .returning(Job.id)
        .execution_options(synchronize_session=False)
    ).all()
    return sorted(set(job_ids) - set(held))


def hold(*, session: Session, job_id: int, worker_id: int) -> Job:
    """Lock and return a running job that ``worker_id`` holds, or raise NotLeasedError."""
    job = session.execute(
        select(Job)
        .where(Job.id == job_id, Job.worker_id == worker_id, Job.state == JobState.RUNNING)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).scalar_one_or_none()
    if job is None:
        raise NotLeasedError(job_id, worker_id)
    return job


def finish(*, session: Session, job: Job, state: JobState, error: str | None = None, now: datetime | None = None) -> None:
    """Move a held job to a final state and release its lease."""
    if not state.is_final:
        raise ValueError(f"{state} is not a final state")
    job.state = state
    job.error = error
    job.finished_at = now or utcnow()
    job.lease_expires_at = None


def requeue_expired(*, session: Session, now: datetime | None = None) -> int:
    """Return jobs whose lease ran out to the queue; fail those that used every attempt.

    Returns how many jobs changed state.
    """
    now = now or utcnow()
    expired = and_(Job.state == JobState.RUNNING, Job.lease_expires_at < now)
    failed = session.execute(
        update(Job)
        .where(expired, Job.attempts >= Job.max_attempts)
        .values(
            state=JobState.FAILED,
            error="lease expired on the last attempt",
            finished_at=now,
            lease_expires_at=None,
        )
        .execution_options(synchronize_session=False)
    ).rowcount
    requeued = session.execute(
        update(Job)
        .where(expired, Job.attempts < Job.max_attempts)
        .values(state=JobState.QUEUED, worker_id=None, lease_expires_at=None)
        .execution_options(synchronize_session=False)
    ).rowcount
    return failed + requeued


def cancel(*, session: Session, sweep_id: int, now: datetime | None = None) -> int:
    """Cancel every queued or running job of a sweep; running ones learn it at their next heartbeat."""
    now = now or utcnow()
    return session.execute(
        update(Job)
        .where(Job.sweep_id == sweep_id, Job.state.in_([JobState.QUEUED, JobState.RUNNING]))
        .values(state=JobState.CANCELLED, finished_at=now, lease_expires_at=None)
        .execution_options(synchronize_session=False)
    ).rowcount


def counts_by_state(*, session: Session, sweep_id: int) -> dict[str, int]:
    return counts_by_sweep(session=session, sweep_ids=[sweep_id]).get(sweep_id, {})


def counts_by_sweep(*, session: Session, sweep_ids: Sequence[int]) -> dict[int, dict[str, int]]:
    """Jobs per state for many sweeps in one query (a list page must not ask once per sweep)."""
    counts: dict[int, dict[str, int]] = {sweep_id: {} for sweep_id in sweep_ids}
    if not sweep_ids:
        return counts
    rows = session.execute(
        select(Job.sweep_id, Job.state, func.count())
        .where(Job.sweep_id.in_(list(sweep_ids)))
        .group_by(Job.sweep_id, Job.state)
    ).all()
    for sweep_id, state, count in rows:
        counts[sweep_id][state.value] = count
    return counts
