"""The job queue in SQL: every statement that claims, leases, requeues or cancels a job lives here.

A claim is one ``UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING``: on
PostgreSQL concurrent claimers skip each other's locked rows instead of waiting; on SQLite the
clause is dropped and the write lock taken by ``BEGIN IMMEDIATE`` (see app.db) serialises claims.
The outer ``state = 'queued'`` guard keeps a claim correct even where the lock is missing.

Which job a claim takes, among those the worker can run (GPU kind, build, at most its GPU count):

0. the second half of a pair whose first half this worker ran (paired runs, below);
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

Paired runs (app.sweeps.pairing): the two jobs of a pair run back to back on one worker, routed rather than
claimed together, so a claim still moves one row. The half with ``pair_order`` 0 goes first, and only to a
worker that can run the other half too (its build) while that half waits to run. The other half is claimable
once its partner left the queue, and then only by the partner's worker while that worker is alive (term 0 puts
it before anything else that worker could take, priority included: the pair must run back to back). It is
freed for any worker when the partner's worker is dead or there was none (cancelled before it ran, or no
partner: an imported sweep whose base was not), so no half waits on a worker that will never claim again; a
partner returned to the queue (its worker died mid-run) takes it along again. Each test of a partner is a probe
of ``ix_jobs_pair``.

A running job is held by its worker for as long as that worker is alive (app.workers.liveness): there
is no per-job lease. ``requeue_stalled`` returns the jobs of dead workers to the queue, or fails them
(app.jobs.retry); the service runs it on its own schedule (app.jobs.stalled), whether or not anyone claims.
"""

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import and_, case, exists, func, or_, select, update
from sqlalchemy.orm import Session, aliased

from app.enums import JobState
from app.jobs import retry
from app.models import Job, Worker, utcnow
from app.workers import liveness


class NotLeasedError(Exception):
    """The worker reported on a job it does not hold (its lease lapsed, or the job was cancelled)."""

    def __init__(self, job_id: int, worker_id: int, why: str = "") -> None:
        super().__init__(f"job {job_id} is not held by worker {worker_id}{': ' + why if why else ''}")
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
    workers. None puts no limit (callers that route by GPU kind only). ``lease_seconds`` tells a dead
    worker, whose pairs' second halves go to any worker.
    """
    now = now or utcnow()
    other = aliased(Job)
    partner = aliased(Job)
    pair_of = and_(partner.pair_id == Job.pair_id, partner.id != Job.id)
    dead = select(Worker.id).where(~liveness.alive(now=now, lease_seconds=lease_seconds))
    # Whether the candidate is the second half of a pair whose first half this worker ran.
    # (IS NOT NULL first: for an unpaired job it is false, not NULL, so the probe is skipped.)
    mine = and_(Job.pair_id.is_not(None), Job.pair_order == 1,
                exists().where(pair_of, partner.state != JobState.QUEUED, partner.worker_id == worker_id))
    # A second half waits while its partner is queued, or was taken by another worker that is alive (a partner that
    # never had a worker, or none at all, an imported sweep's, holds nothing back).
    held = or_(partner.state == JobState.QUEUED, and_(partner.worker_id != worker_id, partner.worker_id.not_in(dead)))
    may_pair = or_(
        Job.pair_id.is_(None),
        and_(Job.pair_order == 0, ~exists().where(pair_of, partner.state == JobState.QUEUED, partner.build.not_in(list(builds)))),
        and_(Job.pair_order == 1, ~exists().where(pair_of, held)),
    )
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
        Job.build.in_(list(builds)),
        Job.attempts < Job.max_attempts,
        may_pair,
    ]
    if gpu_count is not None:
        conditions.append(Job.gpus_needed <= gpu_count)
    candidate = (
        select(Job.id)
        .where(*conditions)
        .order_by(
            # 0 first; a CASE rather than the condition itself, which PostgreSQL would sort NULL first when descending.
            case((mine, 0), else_=1),
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
        .values(state=JobState.RUNNING, worker_id=worker_id, attempts=Job.attempts + 1, started_at=now)
        .returning(Job.id)
        .execution_options(synchronize_session=False)
    ).scalar_one_or_none()
    if job_id is None:
        return None
    return session.execute(
        select(Job).where(Job.id == job_id).execution_options(populate_existing=True)
    ).scalar_one()


def start_elsewhere(*, session: Session, job: Job, started_at: datetime) -> None:
    """Mark a queued job as running outside any worker (``runners/offline.py``), one attempt counted.

    Its outcome is then stored with app.results.service.record, which finishes it like any other.
    """
    if job.state is not JobState.QUEUED:
        raise ValueError(f"job {job.id} is {job.state}, not queued")
    job.state = JobState.RUNNING
    job.attempts += 1
    job.started_at = started_at


def to_stop(*, session: Session, worker_id: int, job_ids: Sequence[int]) -> list[int]:
    """Of ``job_ids``, those ``worker_id`` no longer holds (cancelled, or requeued): it must stop them."""
    if not job_ids:
        return []
    held = session.scalars(
        select(Job.id).where(Job.id.in_(list(job_ids)), Job.worker_id == worker_id, Job.state == JobState.RUNNING)
    ).all()
    return sorted(set(job_ids) - set(held))


def hold(*, session: Session, job_id: int, worker_id: int, lease_seconds: float, now: datetime | None = None) -> Job:
    """Lock and return a running job that ``worker_id`` holds while alive, or raise NotLeasedError.

    A worker whose lease lapsed holds nothing, even before the stalled-job check has requeued its
    jobs: a late result must not land on a job the queue is about to give to another worker.
    """
    now = now or utcnow()
    job = session.execute(
        select(Job)
        .where(Job.id == job_id, Job.worker_id == worker_id, Job.state == JobState.RUNNING)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).scalar_one_or_none()
    if job is None:
        raise NotLeasedError(job_id, worker_id)
    heard = session.scalar(select(Worker.last_heartbeat_at).where(Worker.id == worker_id))
    if heard is None or not liveness.is_alive(heard, now=now, lease_seconds=lease_seconds):
        raise NotLeasedError(job_id, worker_id, f"its lease lapsed (no heartbeat for over {lease_seconds:g} s)")
    return job


def finish(*, session: Session, job: Job, state: JobState, error: str | None = None, now: datetime | None = None) -> None:
    """Move a held job to a final state."""
    if not state.is_final:
        raise ValueError(f"{state} is not a final state")
    job.state = state
    job.error = error
    job.finished_at = now or utcnow()


def requeue_stalled(*, session: Session, lease_seconds: float, now: datetime | None = None) -> int:
    """Jobs running on a dead worker (or on none) go back to the queue, or fail (app.jobs.retry).

    Returns how many jobs changed state. Rows another transaction holds are skipped: the next check
    takes them. ``ix_jobs_state_worker`` serves the scan.
    """
    now = now or utcnow()
    dead = select(Worker.id).where(~liveness.alive(now=now, lease_seconds=lease_seconds))
    stalled = session.scalars(
        select(Job)
        .where(Job.state == JobState.RUNNING, or_(Job.worker_id.is_(None), Job.worker_id.in_(dead)))
        .order_by(Job.id)
        .with_for_update(skip_locked=True, of=Job)
        .execution_options(populate_existing=True)
    ).all()
    for job in stalled:
        decision = retry.after_stall(attempts=job.attempts, max_attempts=job.max_attempts, worker_id=job.worker_id)
        job.state = decision.state
        job.error = decision.error
        if decision.state is JobState.QUEUED:
            job.worker_id = None
        else:
            job.finished_at = now
    return len(stalled)


def cancel(*, session: Session, sweep_id: int, now: datetime | None = None) -> int:
    """Cancel every queued or running job of a sweep; running ones learn it at their next heartbeat."""
    now = now or utcnow()
    return session.execute(
        update(Job)
        .where(Job.sweep_id == sweep_id, Job.state.in_([JobState.QUEUED, JobState.RUNNING]))
        .values(state=JobState.CANCELLED, finished_at=now)
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
