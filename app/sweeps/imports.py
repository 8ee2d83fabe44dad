"""Storing a sweep that ran elsewhere (``runners/offline.py``) as a finished sweep, through the queue's own steps.

The folder is read by runners.folders (the CLI's import command hands its outcomes here). Each cell
that ran is started and finished as a worker's would be, with the times it ran; a cell that never
ran stays queued, visible rather than lost. The same runs imported twice are one sweep.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from app.alarms import service as alarms
from app.crashes import service as crashes
from app.enums import JobState, ResultSource
from app.jobs import queue
from app.models import Build, Sweep
from app.results import service as results
from app.schemas.cell import JobOutcome
from app.schemas.sweep import SweepSpec
from app.schemas.times import EARLIEST, plausible
from app.sweeps import pairing
from app.sweeps import service as sweeps
from app.workers import service as workers

# Imports are not limited by the service's DRAFTBENCH_MAX_JOBS: the jobs already ran.
IMPORT_LIMIT = 100_000


@dataclass(frozen=True)
class RanJob:
    """One job (a cell and repeat) that ran elsewhere: its outcome, its log, and when it ran."""

    cell_index: int
    repeat: int
    outcome: JobOutcome
    log: str
    started_at: datetime
    finished_at: datetime


@dataclass(frozen=True)
class JobLayout:
    """What a sweep's jobs hold beyond its spec: more repeats of some cells (paired starts added after it was
    submitted, ``POST /api/v1/sweeps/{id}/more``) and the pairs its jobs belong to (app.sweeps.pairing)."""

    # cell index -> how many repeats it has, for the cells with more than the spec's ``repeats``
    repeats: Mapping[int, int] = field(default_factory=dict)
    # (cell index, repeat) -> (pair id, pair order), for the paired jobs
    pairs: Mapping[tuple[int, int], tuple[str, int]] = field(default_factory=dict)


# The jobs its spec expands to, none paired.
SPEC_ONLY = JobLayout()


def modified(mtime: float) -> datetime:
    """A file's modification time (``st_mtime``) as when what it records ended, if plausible; ValueError if not."""
    try:
        when = datetime.fromtimestamp(mtime, tz=UTC)
    except (OverflowError, OSError):
        raise ValueError(f"{mtime:g} s after 1970 is not a plausible time") from None
    return plausible(when)


def started(finished_at: datetime, duration_s: float) -> datetime:
    """When a run that lasted ``duration_s`` and ended at ``finished_at`` began; ValueError if not plausibly."""
    if not 0 <= duration_s <= (finished_at - EARLIEST).total_seconds():
        raise ValueError(f"{duration_s:g} s would have the run start before {EARLIEST:%Y-%m-%d} (or it is negative)")
    return finished_at - timedelta(seconds=duration_s)


def import_sweep(
    *, session: Session, spec: SweepSpec, ran: Sequence[RanJob], digest: str, source: ResultSource = ResultSource.CELL,
    layout: JobLayout = SPEC_ONLY,
) -> tuple[Sweep, bool]:
    """The sweep made from these runs, and whether it is new (False: this digest was imported before).

    ``source`` says what measured the results: ``cell`` (runners/offline.py) or ``vllm-bench`` (a file
    of vLLM's own benchmark tools, app.sweeps.bench_files); it is also a tag of the sweep. ``layout`` adds
    the jobs and pairs the sweep had beyond its spec; a pair keeps its id, so the two sweeps of a pair, each
    imported, pair again. The spec's ``paired_with`` named a sweep of the database it came from and is dropped.
    """
    idempotency = sweeps.Idempotency(scope=sweeps.IMPORT_SCOPE, key=digest)
    existing = sweeps.by_key(session=session, idempotency=idempotency)
    if existing is not None:
        return existing, False
    spec = spec.model_copy(update={"paired_with": None})
    sweep = sweeps.build(spec, max_jobs=IMPORT_LIMIT, max_attempts=1)
    _lay_out(sweep, spec, layout)
    sweep.tags = [*sweep.tags, "imported", *([source.value] if source is not ResultSource.CELL else [])]
    sweep.idempotency_scope, sweep.idempotency_key = idempotency.scope, idempotency.key
    sweep.request_hash = sweeps.request_hash(spec)
    if ran:
        sweep.created_at = min(run.started_at for run in ran)
    session.add(sweep)
    session.flush()
    jobs = {(job.cell_index, job.repeat): job for job in sweep.jobs}
    for run in ran:
        job = jobs[(run.cell_index, run.repeat)]
        queue.start_elsewhere(session=session, job=job, started_at=run.started_at)
        crashes.store_log(session=session, job_id=job.id, text=run.log)
        session.flush()
        results.record(session=session, job=job, outcome=run.outcome, finished_at=run.finished_at, refresh_alarms=False)
        if job.result is not None:
            job.result.source = source.value
            # vLLM's own bench tools count a stream without text completed: only the cell runner ever did otherwise.
            job.result.empty_as_failed &= source is ResultSource.CELL
    for job in sweep.jobs:
        if job.state is JobState.QUEUED:
            # It never ran where the sweep ran: history to read here, not work for this service's workers.
            job.max_attempts = 0
    _register_build(session=session, spec=spec, ran=ran)
    # Once per build and GPU kind that gained a result, not once per result.
    for gpu_kind in sorted({jobs[(run.cell_index, run.repeat)].gpu_kind for run in ran if run.outcome.result is not None}):
        alarms.refresh(session=session, build=sweep.build, gpu_kind=gpu_kind)
    session.flush()
    return sweep, True


def _lay_out(sweep: Sweep, spec: SweepSpec, layout: JobLayout) -> None:
    first = {job.cell_index: job for job in reversed(sweep.jobs)}
    for cell_index, repeats in sorted(layout.repeats.items()):
        sweep.jobs.extend(pairing.repeat_of(first[cell_index], repeat=repeat, max_attempts=1)
                          for repeat in range(spec.repeats, repeats))
    jobs = {(job.cell_index, job.repeat): job for job in sweep.jobs}
    for key, (pair_id, order) in layout.pairs.items():
        jobs[key].pair_id, jobs[key].pair_order = pair_id, order


def _register_build(*, session: Session, spec: SweepSpec, ran: Sequence[RanJob]) -> None:
    """The imported build becomes known, with the vLLM version its results report."""
    if spec.build in workers.build_labels(session=session):
        return
    version = next((run.outcome.result.versions.vllm for run in ran if run.outcome.result is not None), None)
    session.add(Build(label=spec.build, vllm_version=version))
