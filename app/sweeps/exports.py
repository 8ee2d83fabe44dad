"""A sweep of the database as the runs ``draftbench import`` reads back: the reverse of app.sweeps.imports.

Each job that ended with an outcome of its cell's process becomes the ``RanJob`` an import would have
made of it (runners.folders writes them as files): a succeeded job its result JSON as validated
(``results.raw``) and exit 0; a crashed or timed-out job how its process ended (its crash row). Both
keep their log and when they finished. ``duration_s`` is the crash's own; a result has none, so it is the
job's time from start to finish, which an import turns back into the job's start. What ran and crash
signatures are not exported: an import reads them again from the log, as ``draftbench rederive`` would.

Jobs without such an outcome (queued, running, cancelled, failed: the worker could not run the cell,
or died) are cells that did not run to an end; only their log, if any, is kept, and they import as
queued. Jobs beyond the spec's repeats (paired starts added later) and the pairs go with them (``JobLayout``), and
the identity of the folder the sweep was imported from (``folder_id``), so that the folder written here, imported
elsewhere and run further there, stays one sweep (app.sweeps.imports). Nothing here writes to the database.
"""

from collections import Counter
from dataclasses import dataclass

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.crashes import service as crashes
from app.enums import JobState
from app.errors import NotFoundError
from app.files import describe
from app.models import Job, Sweep
from app.schemas.cell import CellResult, JobOutcome, Resolved
from app.schemas.sweep import SweepSpec
from app.sweeps import matrix
from app.sweeps.imports import JobLayout, RanJob, cell_dir_name

RAN = (JobState.SUCCEEDED, JobState.CRASHED, JobState.TIMED_OUT)


class ExportError(Exception):
    """The sweep cannot be exported as a folder that imports back to the same jobs."""


@dataclass(frozen=True)
class Export:
    """A sweep's spec, its jobs that ran to an outcome, the logs of the others, by (cell index, repeat), its
    jobs beyond the spec, and the identity of its folder (None for a sweep submitted here or imported from a folder
    without one: its folder gets a new one)."""

    spec: SweepSpec
    ran: list[RanJob]
    cut_logs: dict[tuple[int, int], str]
    states: Counter[str]
    layout: JobLayout
    folder_id: str | None = None


def find(*, session: Session, ref: str) -> Sweep:
    """The sweep whose id or name is ``ref``: NotFoundError if none, ExportError if the name is not unique."""
    # An id beyond 64 bits is no row's (and SQLite would overflow on it): it can only be a name.
    if ref.isdigit() and int(ref) < 2**63:
        sweep = session.get(Sweep, int(ref))
        if sweep is not None:
            return sweep
    ids = list(session.scalars(select(Sweep.id).where(Sweep.name == ref).order_by(Sweep.id)))
    if not ids:
        raise NotFoundError("sweep", repr(ref))
    if len(ids) > 1:
        raise ExportError(f"{len(ids)} sweeps are named {ref!r} (ids {', '.join(map(str, ids))}): name one by its id")
    return session.get_one(Sweep, ids[0])


def export(*, session: Session, sweep: Sweep) -> Export:
    """What ``sweep`` holds, as runs an import stores again; ExportError if its spec no longer expands to its jobs."""
    spec = SweepSpec.model_validate(sweep.spec)
    _check_cells(sweep, spec)
    ran, cut_logs = [], {}
    for job in sweep.jobs:
        log = crashes.read_log(session=session, job_id=job.id)
        if job.state in RAN:
            ran.append(_ran(job, log or ""))
        elif log is not None:
            cut_logs[(job.cell_index, job.repeat)] = log
    repeats = {cell: count for cell, count in _repeats(sweep).items() if count > spec.repeats}
    pairs = {(job.cell_index, job.repeat): (job.pair_id, job.pair_order) for job in sweep.jobs
             if job.pair_id is not None and job.pair_order is not None}
    return Export(spec=spec, ran=ran, cut_logs=cut_logs, states=Counter(job.state.value for job in sweep.jobs),
                  layout=JobLayout(repeats=repeats, pairs=pairs), folder_id=sweep.folder_id)


def _repeats(sweep: Sweep) -> dict[int, int]:
    """Per cell index, one past its highest stored repeat."""
    counts: dict[int, int] = {}
    for job in sweep.jobs:
        counts[job.cell_index] = max(counts.get(job.cell_index, 0), job.repeat + 1)
    return counts


def _check_cells(sweep: Sweep, spec: SweepSpec) -> None:
    """The spec must expand to the stored jobs, cell for cell: an import makes its jobs from the spec alone, and a
    cell's repeats past the spec's (paired starts added later) from the same cell."""
    stored_repeats = _repeats(sweep)
    expected = {
        (cell.index, repeat): matrix.config_hash(cell.spec)
        for cell in matrix.expand(spec)
        for repeat in range(max(spec.repeats, stored_repeats.get(cell.index, 0)))
    }
    stored = {(job.cell_index, job.repeat): job.config_hash for job in sweep.jobs}
    if stored != expected:
        moved = sorted(key for key in expected.keys() | stored.keys() if expected.get(key) != stored.get(key))
        shown = ", ".join(f"c{index}-r{repeat}" for index, repeat in moved[:5])
        raise ExportError(
            f"sweep {sweep.id} '{sweep.name}': its stored spec no longer expands to its jobs ({len(expected)} cells "
            f"and repeats from the spec, {len(stored)} jobs; {len(moved)} differ, first {shown}); an import of it "
            "would make other jobs"
        )


def _ran(job: Job, log: str) -> RanJob:
    finished = job.finished_at
    started = job.started_at or finished
    if job.state is JobState.SUCCEEDED:
        try:
            result = CellResult.model_validate(job.result.raw)
        except ValidationError as exc:
            raise ExportError(
                f"job {job.id} (cells/{cell_dir_name(job.cell_index, job.repeat)}): its stored result is one an import refuses "
                f"({describe(exc)}), stored before the service refused such reports"
            ) from None
        outcome = JobOutcome(
            result=result,
            resolved=Resolved.model_validate(job.result.ran),
            exit_code=0,
            duration_s=(finished - started).total_seconds(),
        )
    else:
        crash = job.crash
        outcome = JobOutcome(
            exit_code=crash.exit_code,
            signal=crash.signal,
            timed_out=job.state is JobState.TIMED_OUT,
            duration_s=crash.duration_s or 0.0,
        )
    return RanJob(cell_index=job.cell_index, repeat=job.repeat, outcome=outcome, log=log,
                   started_at=started, finished_at=finished)
