"""Storing a sweep that ran elsewhere (``runners/offline.py``) as a finished sweep, through the queue's own steps.

The folder is read by runners.folders (the CLI's import command hands its outcomes here). Each cell
that ran is started and finished as a worker's would be, with the times it ran; a cell that never
ran stays queued, visible rather than lost.

The same runs are stored once. A run is known by what its job asked, where it sits in its sweep and when it ran, as
its ``exit.json`` says (``run_identity``), not by the bytes of its files: a folder whose runs a stored sweep holds as
they are adds nothing, and one that holds them with other content (a log edited, a result touched up) is refused
(``RunsStored``) rather than stored a second time or over what is stored. A folder run further after its import
(``runners/offline.py --only-missing``), which differs from its sweep only in runs of jobs that sweep never ran, adds
those runs to it, stored as its first import would have stored them.

A folder is known by an identity of its own as well: the random ``folder_id`` that ``draftbench expand`` writes in
``folder.json`` (``FOLDER_FILE``), which ``draftbench export`` writes again from its sweep, and a new sweep keeps. Runs
alone cannot tell a folder imported before any of its cells ran, since it has none to be known by: imported again
after they ran, it would become a second sweep beside the empty one. The sweep of its ``folder_id`` is the folder's,
whether it holds any of its runs or not, and the same rules hold against it: runs of its jobs that never ran are
added, any other difference is refused. Two folders expanded from one spec are two folders, and two sweeps. A folder
without ``folder.json`` (an older ``expand``) is known by its runs alone, as before.
"""

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pydantic import ValidationError
from sqlalchemy import select, text
from sqlalchemy.orm import Session, defer

from app.alarms import service as alarms
from app.crashes import service as crashes
from app.enums import JobState, ResultSource
from app.errors import ConflictError
from app.jobs import queue
from app.models import Build, Crash, Job, Sweep
from app.results import service as results
from app.schemas.cell import CellResult, JobOutcome
from app.schemas.sweep import SweepSpec
from app.schemas.times import EARLIEST, plausible
from app.sweeps import pairing
from app.sweeps import service as sweeps
from app.workers import service as workers

# Imports are not limited by the service's DRAFTBENCH_MAX_JOBS: the jobs already ran.
IMPORT_LIMIT = 100_000
# An imported job's attempts allowed here: none, so that no worker of this service runs it; storing its run gives it
# the one it had where it ran (``_store_runs``).
_NO_ATTEMPT = 0


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

# Jobs that ran to an end, whose run an import may hold again.
_RAN = (JobState.SUCCEEDED, JobState.CRASHED, JobState.TIMED_OUT, JobState.FAILED)
# ``exit.json`` keeps a run's duration to the millisecond (``runners.offline.exit_record``); its duration and the
# stored one agree within both roundings.
_SAME_DURATION_S = 0.002
# The files a refusal names before it counts the rest.
_NAMED = 5
# The file beside ``sweep.json`` that holds a folder's identity (``{"folder_id": ...}``), as expand, export and the
# import's refusals name it.
FOLDER_FILE = "folder.json"


@dataclass(frozen=True)
class Imported:
    """What an import did: the sweep that holds the folder's runs, whether this import made it, and how many runs it
    stored into that sweep when it was stored before (runs of jobs it never ran, run since): 0 when the sweep is new
    or held every run already."""

    sweep: Sweep
    created: bool
    added: int = 0


@dataclass(frozen=True)
class _Difference:
    """Where a folder differs from a stored sweep, as a refusal names it (a file, or a job's folder and why), and the
    run to add to the sweep when the difference is only that: a run of a job the sweep holds but never ran."""

    name: str
    adds: RanJob | None = None


class RunsStored(ConflictError):
    """A folder holds runs a stored sweep holds, or is the folder a stored sweep was imported from (``same_folder``: its
    ``folder_id`` is the sweep's), but its content is not that sweep's: nothing is imported, and the stored sweep stays
    as it is. The message names the sweep and where the folder differs from it."""

    def __init__(self, sweep: Sweep, *, matched: int, ran: int, differences: Sequence[str], also: Sequence[int],
                 same_folder: bool = False) -> None:
        shown = ", ".join(differences[:_NAMED])
        more = f" (and {len(differences) - _NAMED} more)" if len(differences) > _NAMED else ""
        elsewhere = f" (some also in sweep {', '.join(map(str, also))})" if also else ""
        if same_folder:
            # It may hold none of its runs yet (imported before any ran): the folder's identity is what names the sweep.
            held = (f"it is the folder imported as sweep {sweep.id} '{sweep.name}' (its {FOLDER_FILE} says so), which "
                    f"holds {matched} of its {ran} runs{elsewhere}")
        else:
            held = f"{matched} of its {ran} runs are stored already, as sweep {sweep.id} '{sweep.name}'{elsewhere}"
        super().__init__(
            f"{held}, and it differs from that sweep in {shown}{more}: a run is stored once, and a stored run is never "
            "replaced"
        )
        self.sweep_id, self.differences = sweep.id, list(differences)


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
    layout: JobLayout = SPEC_ONLY, folder_id: str | None = None,
) -> Imported:
    """The sweep that holds these runs, and whether it is new (False: a stored sweep holds them; ``added``: how many of
    them this import stored into it).

    The runs are stored already when this digest was imported before, or when a stored sweep holds every one of them
    (``run_identity``) with the same content and spec. When it holds some of them and the folder differs from it only
    in runs of jobs it never ran (queued with no attempt allowed here: a folder run further after its import), those
    runs are stored into those jobs as a new sweep's would be. RunsStored when a stored sweep holds some of them but
    the folder differs from it otherwise: another log, result or exit, runs of jobs it ran or lacks, another spec or
    layout; nothing is stored then.

    ``folder_id`` is the folder's own identity (``FOLDER_FILE``; None for a folder without one, known by its runs
    alone). A stored sweep of that ``folder_id`` is the folder's sweep even when it holds none of its runs (the folder
    was imported before any of its cells ran), and the same rules hold against it; a new sweep keeps it.

    ``source`` says what measured the results: ``cell`` (runners/offline.py) or ``vllm-bench`` (a file of vLLM's own
    benchmark tools, app.sweeps.bench_files); it is also a tag of the sweep. ``layout`` adds
    the jobs and pairs the sweep had beyond its spec; a pair keeps its id, so the two sweeps of a pair, each
    imported, pair again. The spec's ``paired_with`` named a sweep of the database it came from and is dropped.
    """
    _lock(session)
    idempotency = sweeps.Idempotency(scope=sweeps.IMPORT_SCOPE, key=digest)
    existing = sweeps.by_key(session=session, idempotency=idempotency)
    if existing is not None:
        return Imported(existing, created=False)
    spec = spec.model_copy(update={"paired_with": None})
    sweep = sweeps.build(spec, max_jobs=IMPORT_LIMIT, max_attempts=_NO_ATTEMPT)
    _lay_out(sweep, spec, layout)
    stored = _stored_already(session=session, spec=spec, ran=ran, layout=layout, cells=sweep.jobs, folder_id=folder_id)
    if stored is not None:
        held, new = stored
        if new:
            # As if imported with the rest: the sweep began when the first of its runs did. One imported before any of
            # its cells ran holds the time of that import, not of a run: it takes its first run's.
            first = min(run.started_at for run in new)
            ran_before = any(job.started_at is not None for job in held.jobs)
            held.created_at = min(held.created_at, first) if ran_before else first
            _store_runs(session=session, sweep=held, spec=spec, ran=new, source=source)
        return Imported(held, created=False, added=len(new))
    sweep.tags = [*sweep.tags, "imported", *([source.value] if source is not ResultSource.CELL else [])]
    sweep.idempotency_scope, sweep.idempotency_key = idempotency.scope, idempotency.key
    sweep.request_hash = sweeps.request_hash(spec)
    sweep.folder_id = folder_id
    if ran:
        sweep.created_at = min(run.started_at for run in ran)
    session.add(sweep)
    session.flush()
    _store_runs(session=session, sweep=sweep, spec=spec, ran=ran, source=source)
    return Imported(sweep, created=True)


def _store_runs(*, session: Session, sweep: Sweep, spec: SweepSpec, ran: Sequence[RanJob], source: ResultSource) -> None:
    """Store each run on ``sweep``'s job of its cell and repeat, queued and never run, as a worker's run is stored, with
    the times it ran: started (its one attempt), its log, its outcome finishing it, what measured its result. A job
    left queued never ran where the sweep ran: history to read here, not work for this service's workers (it keeps
    no attempt). The build becomes known, and the alarm is judged once per GPU kind that gained a result, not once
    per result. The sweep reads finished when none of its jobs runs (``app.sweeps.service.state_of``)."""
    jobs = {(job.cell_index, job.repeat): job for job in sweep.jobs}
    for run in ran:
        job = jobs[(run.cell_index, run.repeat)]
        job.max_attempts = 1  # the attempt it had where it ran, which start_elsewhere counts
        queue.start_elsewhere(session=session, job=job, started_at=run.started_at)
        crashes.store_log(session=session, job_id=job.id, text=run.log)
        session.flush()
        results.record(session=session, job=job, outcome=run.outcome, finished_at=run.finished_at, refresh_alarms=False)
        if job.result is not None:
            job.result.source = source.value
            # vLLM's own bench tools count a stream without text completed: only the cell runner ever did otherwise.
            job.result.empty_as_failed &= source is ResultSource.CELL
    _register_build(session=session, spec=spec, ran=ran)
    # Once per build and GPU kind that gained a result, not once per result.
    for gpu_kind in sorted({jobs[(run.cell_index, run.repeat)].gpu_kind for run in ran if run.outcome.result is not None}):
        alarms.refresh(session=session, build=sweep.build, gpu_kind=gpu_kind)
    session.flush()


def run_identity(job: Job, finished_at: datetime) -> tuple[object, ...]:
    """What tells one run from another: what its job asked (build, GPU kind, backend, graph mode, method), its place in
    the sweep (cell and repeat: its folder, ``c0003-r1``) and when it ended, to the second, as ``exit.json`` records
    it; two runs of one identity are one when their durations agree as well (``_SAME_DURATION_S``). Not its sweep's
    name or tags, nor the bytes of its files: a folder edited after its import holds the same runs. Two runs of one
    spec at other times are other runs, and make a sweep of their own."""
    return (job.build, job.gpu_kind, job.backend, job.graph_mode, job.method, job.cell_index, job.repeat,
            finished_at.astimezone(UTC).replace(microsecond=0))


def _lock(session: Session) -> None:
    """On PostgreSQL, imports one after the other to the end of the transaction, so that the second sees the runs the
    first stored. SQLite takes its one writer's lock at BEGIN (``app.db``)."""
    if session.get_bind().dialect.name == "postgresql":
        digest = hashlib.sha256(b"draftbench imports").digest()
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": int.from_bytes(digest[:8], "big", signed=True)})


def _stored_already(
    *, session: Session, spec: SweepSpec, ran: Sequence[RanJob], layout: JobLayout, cells: Sequence[Job],
    folder_id: str | None,
) -> tuple[Sweep, list[RanJob]] | None:
    """The stored sweep of this folder, with those of its runs it lacks that it may take (runs of its jobs that never
    ran, when the folder differs from it in nothing else), or None when no sweep is. The folder's sweep is the one of
    its ``folder_id``, whether it holds any of these runs or not, else the one holding the most of them. RunsStored
    when that sweep differs from the folder otherwise, or another sweep holds some of its runs too. ``cells`` are the
    jobs the import would make, not stored."""
    holders = _holders(session=session, build=spec.build, ran=ran, cells=cells)
    named = _of_folder(session=session, folder_id=folder_id)
    if named is None and not holders:
        return None
    counts = Counter(job.sweep_id for job in holders.values())
    sweep = named if named is not None else session.get_one(Sweep, min(counts, key=lambda ident: (-counts[ident], ident)))
    matched = {key: job for key, job in holders.items() if job.sweep_id == sweep.id}
    differences = _differences(session=session, sweep=sweep, spec=spec, ran=ran, matched=matched, layout=layout)
    also = sorted(set(counts) - {sweep.id})
    new = [difference.adds for difference in differences if difference.adds is not None]
    # A run another sweep holds is never added: it would be stored twice.
    if len(new) < len(differences) or (new and also):
        raise RunsStored(sweep, matched=len(matched), ran=len(ran),
                         differences=[difference.name for difference in differences], also=also,
                         same_folder=named is not None)
    return sweep, new


def _of_folder(*, session: Session, folder_id: str | None) -> Sweep | None:
    """The sweep imported from the folder of ``folder_id`` (one at most: ``ix_sweeps_folder_id`` is unique, and an
    import makes a sweep of a ``folder_id`` only when none has it); None for a folder without one."""
    if folder_id is None:
        return None
    return session.scalars(select(Sweep).where(Sweep.folder_id == folder_id)).one_or_none()


def _holders(*, session: Session, build: str, ran: Sequence[RanJob], cells: Sequence[Job]) -> dict[tuple[int, int], Job]:
    """(cell index, repeat) of each run some stored job holds already -> that job (the first stored)."""
    if not ran:
        return {}
    jobs = {(job.cell_index, job.repeat): job for job in cells}
    wanted = {run_identity(jobs[(run.cell_index, run.repeat)], run.finished_at): run for run in ran}
    seconds = [identity[-1] for identity in wanted]
    rows = session.execute(
        select(Job, Crash.duration_s)
        .outerjoin(Crash, Crash.job_id == Job.id)
        .where(Job.state.in_(_RAN), Job.build == build, Job.finished_at >= min(seconds),
               Job.finished_at < max(seconds) + timedelta(seconds=1))
        .order_by(Job.id)
        .options(defer(Job.spec))
    ).all()
    found: dict[tuple[int, int], Job] = {}
    for job, crash_duration in rows:
        run = wanted.get(run_identity(job, job.finished_at))
        if run is None or (run.cell_index, run.repeat) in found:
            continue
        # A crash keeps the duration its process reported, which is what an export writes; a result, the job's.
        duration = crash_duration if crash_duration is not None else (job.finished_at - (job.started_at or job.finished_at)).total_seconds()
        if abs(duration - (run.finished_at - run.started_at).total_seconds()) <= _SAME_DURATION_S:
            found[(run.cell_index, run.repeat)] = job
    return found


def _differences(
    *, session: Session, sweep: Sweep, spec: SweepSpec, ran: Sequence[RanJob], matched: Mapping[tuple[int, int], Job],
    layout: JobLayout,
) -> list[_Difference]:
    """Where a folder of ``spec``, ``ran`` and ``layout`` differs from ``sweep``, which holds the runs ``matched``: the
    files of each run whose content is not the stored run's, each run the sweep does not hold (one of a job it never
    ran, to add), a job it lacks, and the spec or pairs. Empty when the sweep holds the folder as it is (runs it holds
    beyond the folder's are stored)."""
    differences = [] if _same_spec(sweep, spec) else [_Difference("sweep.json")]
    jobs = {(job.cell_index, job.repeat): job for job in sweep.jobs}
    for run in sorted(ran, key=lambda run: (run.cell_index, run.repeat)):
        key, name = (run.cell_index, run.repeat), _folder_of(run.cell_index, run.repeat)
        job = jobs.get(key)
        if key in matched:
            files = _files_differing(session=session, run=run, job=matched[key])
            differences += [_Difference(f"{name}/{file}") for file in files]
        elif job is None:
            differences.append(_Difference(f"{name} (no such job in sweep {sweep.id})"))
        elif job.state in _RAN:
            differences.append(_Difference(f"{name}/exit.json (another run than sweep {sweep.id}'s)"))
        elif job.state is JobState.QUEUED and job.attempts >= job.max_attempts:
            differences.append(_Difference(f"{name} (not run in sweep {sweep.id})", adds=run))
        else:
            # Queued for this service's workers, running, or cancelled: a run here is not one to add.
            differences.append(_Difference(f"{name} ({job.state.value} in sweep {sweep.id})"))
    # Jobs past the spec's repeats (paired starts added later), each a folder with its spec.json: the runs among them
    # are named above.
    beyond = {key for key in jobs if key[1] >= spec.repeats}
    wanted = {(cell, repeat) for cell, count in layout.repeats.items() for repeat in range(spec.repeats, count)}
    ran_keys = {(run.cell_index, run.repeat) for run in ran}
    differences += [_Difference(f"{_folder_of(*key)}/spec.json") for key in sorted((beyond ^ wanted) - ran_keys)]
    pairs = {(job.cell_index, job.repeat): (job.pair_id, job.pair_order) for job in sweep.jobs if job.pair_id is not None}
    if pairs != dict(layout.pairs):
        differences.append(_Difference("pairs.json"))
    return differences


def cell_dir_name(cell_index: int, repeat: int) -> str:
    """A job's folder's name under ``cells/`` in a folder of runs (``c0003-r1``), as expand, export and import name it."""
    return f"c{cell_index:04d}-r{repeat}"


def _folder_of(cell_index: int, repeat: int) -> str:
    return f"cells/{cell_dir_name(cell_index, repeat)}"


def _same_spec(sweep: Sweep, spec: SweepSpec) -> bool:
    """Whether ``spec`` (without ``paired_with``) is the stored sweep's, as this version reads both."""
    try:
        stored = SweepSpec.model_validate(sweep.spec).model_copy(update={"paired_with": None})
    except ValidationError:
        return sweep.request_hash == sweeps.request_hash(spec)
    return sweeps.request_hash(stored) == sweeps.request_hash(spec)


def _files_differing(*, session: Session, run: RanJob, job: Job) -> list[str]:
    """The files of ``run`` whose content is not what ``job`` stored of the same run (its exit: how it ended)."""
    outcome, crash = run.outcome, job.crash
    ended = (outcome.exit_code, outcome.signal, outcome.timed_out)
    stored_end = (crash.exit_code, crash.signal, job.state is JobState.TIMED_OUT) if crash is not None else (0, None, False)
    files = [] if ended == stored_end else ["exit.json"]
    if _result_json(job) != (outcome.result.model_dump(mode="json") if outcome.result is not None else None):
        files.append("result.json")
    if (crashes.read_log(session=session, job_id=job.id) or "") != run.log:
        files.append("cell.log")
    return sorted(files)


def _result_json(job: Job) -> dict | str | None:
    """The job's stored result as this version validates and writes it; a marker no result equals if it is not valid."""
    if job.result is None:
        return None
    try:
        return CellResult.model_validate(job.result.raw).model_dump(mode="json")
    except ValidationError:
        return "unreadable"


def _lay_out(sweep: Sweep, spec: SweepSpec, layout: JobLayout) -> None:
    first = {job.cell_index: job for job in reversed(sweep.jobs)}
    for cell_index, repeats in sorted(layout.repeats.items()):
        sweep.jobs.extend(pairing.repeat_of(first[cell_index], repeat=repeat, max_attempts=_NO_ATTEMPT)
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
