"""Cells as files, for hosts that cannot reach the service: write a sweep's cells out, read what ran back.

``draftbench expand`` writes ``sweep.json`` and ``cells/NAME/spec.json``; ``runners/offline.py``
adds ``cell.log``, ``exit.json`` and ``result.json`` beside each spec; ``draftbench import`` reads
them back here and hands the outcomes to app.sweeps.imports, which stores them. ``draftbench export``
writes a sweep of the database the same way (``write_runs``, from app.sweeps.exports).
"""

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from app.schemas.cell import CellSpec
from app.schemas.sweep import SweepSpec
from app.sweeps import matrix
from app.sweeps.imports import RanCell
from runners.offline import FINISHED_AT_FORMAT, exit_record
from runners.outcome import outcome_of


def cell_dir_name(cell_index: int, repeat: int) -> str:
    return f"c{cell_index:04d}-r{repeat}"


def write_cells(spec: SweepSpec, folder: Path) -> int:
    """Write ``sweep.json`` and one ``cells/NAME/spec.json`` per cell and repeat; returns the cell count."""
    cells = matrix.expand(spec)
    (folder / "cells").mkdir(parents=True, exist_ok=True)
    (folder / "sweep.json").write_text(json.dumps(spec.model_dump(mode="json"), indent=2))
    for cell in cells:
        for repeat in range(spec.repeats):
            cell_dir = folder / "cells" / cell_dir_name(cell.index, repeat)
            cell_dir.mkdir(exist_ok=True)
            (cell_dir / "spec.json").write_text(json.dumps(matrix.canonical(cell.spec), indent=2))
    return len(cells)


def write_runs(spec: SweepSpec, folder: Path, ran: Sequence[RanCell], cut_logs: Mapping[tuple[int, int], str]) -> None:
    """The folder ``read_folder`` reads back as these runs: ``write_cells``'s files, and beside each run's
    spec its ``cell.log``, ``exit.json`` and (when it has one) ``result.json``.

    ``cut_logs`` are logs of cells that did not run to an end, written without ``exit.json`` as
    runners/offline.py leaves a cell its budget cut. Raises FileExistsError for a folder that is not empty.
    """
    if folder.exists() and any(folder.iterdir()):
        raise FileExistsError(f"{folder} is not empty")
    write_cells(spec, folder)
    for (cell_index, repeat), log in cut_logs.items():
        (folder / "cells" / cell_dir_name(cell_index, repeat) / "cell.log").write_bytes(log.encode())
    for cell in ran:
        cell_dir = folder / "cells" / cell_dir_name(cell.cell_index, cell.repeat)
        outcome = cell.outcome
        (cell_dir / "cell.log").write_bytes(cell.log.encode())
        if outcome.result is not None:
            (cell_dir / "result.json").write_text(outcome.result.model_dump_json(indent=2))
        exit_info = exit_record(exit_code=outcome.exit_code, signal=outcome.signal, timed_out=outcome.timed_out,
                                duration_s=outcome.duration_s, finished_at=cell.finished_at)
        (cell_dir / "exit.json").write_text(json.dumps(exit_info))


def read_folder(folder: Path) -> tuple[SweepSpec, list[RanCell], str]:
    """The sweep, every cell that ran (``exit.json`` present), and a digest of the folder's content.

    Equal digests mean the same runs: importing a folder twice is recognised by it.
    """
    spec = SweepSpec.model_validate_json((folder / "sweep.json").read_text())
    digest = hashlib.sha256((folder / "sweep.json").read_bytes())
    ran = []
    for cell in matrix.expand(spec):
        for repeat in range(spec.repeats):
            cell_dir = folder / "cells" / cell_dir_name(cell.index, repeat)
            if not (cell_dir / "exit.json").is_file():
                continue
            for name in ("exit.json", "result.json", "cell.log"):
                path = cell_dir / name
                digest.update(f"\n{cell_dir.name}/{name}\n".encode())
                digest.update(path.read_bytes() if path.is_file() else b"")
            ran.append(_ran(cell_dir, cell.index, repeat, cell.spec))
    return spec, ran, digest.hexdigest()


def _ran(cell_dir: Path, cell_index: int, repeat: int, spec: CellSpec) -> RanCell:
    exit_info = json.loads((cell_dir / "exit.json").read_text())
    # Bytes, as the worker reads its cells' logs: text mode would turn vLLM's progress bars' \r into \n.
    log = (cell_dir / "cell.log").read_bytes().decode(errors="replace") if (cell_dir / "cell.log").is_file() else ""
    outcome = outcome_of(
        spec,
        log=log,
        result_path=cell_dir / "result.json",
        exit_code=exit_info["exit_code"],
        signal=exit_info["signal"],
        timed_out=exit_info["timed_out"],
        duration_s=exit_info["duration_s"],
    )
    # offline.py records when each cell finished; older folders without it take the files' time.
    finished_at = (
        datetime.strptime(exit_info["finished_at"], FINISHED_AT_FORMAT).replace(tzinfo=UTC)
        if exit_info.get("finished_at")
        else datetime.fromtimestamp((cell_dir / "exit.json").stat().st_mtime, tz=UTC)
    )
    return RanCell(
        cell_index=cell_index,
        repeat=repeat,
        outcome=outcome,
        log=log,
        started_at=finished_at - timedelta(seconds=exit_info["duration_s"]),
        finished_at=finished_at,
    )
