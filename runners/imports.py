"""Cells as files, for hosts that cannot reach the service: write them out, read results back in."""

import json
from pathlib import Path

from sqlalchemy.orm import Session

from app.crashes import service as crashes
from app.enums import JobState
from app.models import Build, Sweep
from app.results import service as results
from app.schemas.cell import CellOutcome, CellSpec
from app.schemas.sweep import SweepSpec
from app.sweeps import service as sweeps
from runners.outcome import outcome_of

IMPORT_LIMIT = 100_000


def cell_dir_name(cell_index: int, repeat: int) -> str:
    return f"c{cell_index:04d}-r{repeat}"


def write_cells(spec: SweepSpec, folder: Path) -> int:
    """Write ``sweep.json`` and one ``cells/NAME/spec.json`` per cell and repeat; returns the cell count."""
    sweep = sweeps.build(spec, max_cells=IMPORT_LIMIT, max_attempts=1)
    (folder / "cells").mkdir(parents=True, exist_ok=True)
    (folder / "sweep.json").write_text(json.dumps(spec.model_dump(mode="json"), indent=2))
    for job in sweep.jobs:
        cell_dir = folder / "cells" / cell_dir_name(job.cell_index, job.repeat)
        cell_dir.mkdir(exist_ok=True)
        (cell_dir / "spec.json").write_text(json.dumps(job.config, indent=2))
    return len({job.cell_index for job in sweep.jobs})


def import_folder(*, session: Session, folder: Path) -> Sweep:
    """A finished sweep from a folder that runners/offline.py ran: results, crashes and logs.

    A cell without ``exit.json`` never ran and stays queued, so it is visible rather than lost.
    """
    spec = SweepSpec.model_validate_json((folder / "sweep.json").read_text())
    sweep = sweeps.build(spec, max_cells=IMPORT_LIMIT, max_attempts=1)
    sweep.tags = [*sweep.tags, "imported"]
    session.add(sweep)
    session.flush()
    for job in sweep.jobs:
        cell_dir = folder / "cells" / cell_dir_name(job.cell_index, job.repeat)
        if not (cell_dir / "exit.json").is_file():
            continue
        job.state, job.attempts = JobState.RUNNING, 1
        log = (cell_dir / "cell.log").read_text(errors="replace") if (cell_dir / "cell.log").is_file() else ""
        crashes.store_log(session=session, job_id=job.id, text=log)
        session.flush()
        results.record(session=session, job=job, outcome=_outcome(cell_dir, CellSpec.model_validate(job.config), log))
    _register_build(session=session, sweep=sweep)
    session.flush()
    return sweep


def _outcome(cell_dir: Path, spec: CellSpec, log: str) -> CellOutcome:
    exit_info = json.loads((cell_dir / "exit.json").read_text())
    return outcome_of(
        spec,
        log=log,
        result_path=cell_dir / "result.json",
        exit_code=exit_info["exit_code"],
        signal=exit_info["signal"],
        timed_out=exit_info["timed_out"],
        duration_s=exit_info["duration_s"],
    )


def _register_build(*, session: Session, sweep: Sweep) -> None:
    """The imported build becomes known, with the vLLM version its results report."""
    label = sweep.spec["build"]
    version = next((j.result.vllm_version for j in sweep.jobs if j.result is not None), None)
    if session.query(Build).filter_by(label=label).one_or_none() is None:
        session.add(Build(label=label, vllm_version=version))
