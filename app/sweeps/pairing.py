"""Paired runs: each job of a sweep runs beside the job of the same cell and repeat of another sweep, back to back
on one worker.

A CI comparison runs a cell's base start and head start on one worker, one right after the other, so what the host
does meanwhile (its clocks, its neighbours, its heat) moves both alike and falls out of their ratio. Job r of cell
c of one sweep pairs with job r of cell c of the other: both get one ``pair_id`` (32 hex digits, unique wherever
the jobs are exported to), and ``pair_order`` says which of the two runs first. The order alternates with the
repeat, base first on even repeats and head first on odd ones (A B, B A, A B...): a start that gains from running
second (a warm GPU, warm caches) then favours neither side, where base-first every time would bias each ratio
the same way. The queue (``app.jobs.queue.claim``) routes the second of a pair to the worker that ran the first.

Which sweep is the base: the one the other names in its spec's ``paired_with``. Validating a pairing needs the
sweeps' states and lives in ``app.sweeps.service``; this module reads and writes jobs only.
"""

import uuid
from collections.abc import Mapping

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.enums import JobState
from app.models import Job, Sweep


def orders(repeat: int) -> tuple[int, int]:
    """``(base's pair_order, head's pair_order)`` of the pair of ``repeat``: the base first on even repeats."""
    return (0, 1) if repeat % 2 == 0 else (1, 0)


def pair(*, session: Session, base: Sweep, head: Sweep) -> int:
    """Pair each job of ``head`` (new, flushed) with the job of the same cell and repeat of ``base`` that is still
    queued; returns how many pairs were made.

    The base's queued jobs are locked first (``FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite's write lock is the
    transaction's): a job a worker is claiming right now is skipped, runs alone, and so does its head job. The
    locked ones cannot be claimed before this transaction commits them paired.
    """
    heads = {(job.cell_index, job.repeat): job for job in head.jobs}
    queued = session.scalars(
        select(Job)
        .where(Job.sweep_id == base.id, Job.state == JobState.QUEUED, Job.pair_id.is_(None))
        .order_by(Job.id)
        .with_for_update(skip_locked=True, of=Job)
        .execution_options(populate_existing=True)
    ).all()
    made = 0
    for job in queued:
        partner = heads.get((job.cell_index, job.repeat))
        if partner is None:
            continue
        _join(job, partner)
        made += 1
    session.flush()
    return made


def partner(*, session: Session, sweep_id: int) -> int | None:
    """The sweep whose jobs ``sweep_id``'s are paired with (either side), or None.

    One of its pair ids, then that pair's other job: a pair joins two sweeps. Not one join of the jobs with
    themselves: where most jobs run unpaired, SQLite's statistics (ANALYZE) count every NULL pair id as one key, so
    its planner scans all jobs once per job of the sweep (10 s at 100k jobs: the sweep page's first view).
    """
    pair = session.scalar(select(Job.pair_id).where(Job.sweep_id == sweep_id, Job.pair_id.is_not(None)).limit(1))
    if pair is None:
        return None
    # (With those statistics SQLite may read this one by a scan of the jobs: once, some milliseconds.)
    return session.scalar(select(Job.sweep_id).where(Job.pair_id == pair, Job.sweep_id != sweep_id).limit(1))


def unpaired(*, session: Session, sweep_id: int) -> int:
    """How many of a paired sweep's jobs run alone (their partner had started when the sweeps were paired)."""
    return session.scalar(select(func.count()).where(Job.sweep_id == sweep_id, Job.pair_id.is_(None))) or 0


def cell_count(*, session: Session, sweep_id: int) -> int:
    """How many cells the sweep's jobs cover (its cell indices run from 0 to this, less one)."""
    return session.scalar(select(func.count(func.distinct(Job.cell_index))).where(Job.sweep_id == sweep_id)) or 0


def add(*, session: Session, base: Sweep, head: Sweep, cells: Mapping[int, int], max_attempts: int) -> int:
    """``cells[c]`` more pairs of starts of cell ``c``: per pair a new job in each sweep, at the next repeat of the
    cell (one past the highest of either sweep, so a pair's two jobs share their repeat), paired. Returns the jobs
    added. Each new job copies its cell's first job in its own sweep (its spec, build, priority, GPUs).
    """
    added = 0
    templates = {sweep.id: _first_jobs(session=session, sweep_id=sweep.id, cells=cells) for sweep in (base, head)}
    nexts = dict(session.execute(
        select(Job.cell_index, func.max(Job.repeat) + 1)
        .where(Job.sweep_id.in_([base.id, head.id]), Job.cell_index.in_(list(cells)))
        .group_by(Job.cell_index)
    ).all())
    for cell_index, pairs in sorted(cells.items()):
        for repeat in range(nexts[cell_index], nexts[cell_index] + pairs):
            made = [repeat_of(templates[sweep.id][cell_index], repeat=repeat, max_attempts=max_attempts)
                    for sweep in (base, head)]
            _join(*made)
            session.add_all(made)
            added += 2
    session.flush()
    return added


def _join(base_job: Job, head_job: Job) -> None:
    base_job.pair_id = head_job.pair_id = uuid.uuid4().hex
    base_job.pair_order, head_job.pair_order = orders(base_job.repeat)


def _first_jobs(*, session: Session, sweep_id: int, cells: Mapping[int, int]) -> dict[int, Job]:
    jobs = session.scalars(
        select(Job).where(Job.sweep_id == sweep_id, Job.cell_index.in_(list(cells))).order_by(Job.cell_index, Job.repeat)
    ).all()
    first: dict[int, Job] = {}
    for job in jobs:
        first.setdefault(job.cell_index, job)
    return first


def repeat_of(job: Job, *, repeat: int, max_attempts: int) -> Job:
    """Another start of ``job``'s cell, in its sweep, at ``repeat``: queued, not paired."""
    return Job(
        sweep_id=job.sweep_id, cell_index=job.cell_index, repeat=repeat, build=job.build, gpu_kind=job.gpu_kind, backend=job.backend,
        graph_mode=job.graph_mode, method=job.method, mode=job.mode, concurrency=job.concurrency, env=job.env,
        spec=job.spec, config_hash=job.config_hash, priority=job.priority, gpus_needed=job.gpus_needed,
        max_attempts=max_attempts,
    )
