"""Cells as files, for hosts that cannot reach the service: write a sweep's cells out, read what ran back.

``draftbench expand`` writes ``sweep.json`` and ``cells/NAME/spec.json``; ``runners/offline.py``
adds ``cell.log``, ``exit.json`` and ``result.json`` beside each spec; ``draftbench import`` reads
them back here and hands the outcomes to app.sweeps.imports, which stores them. ``draftbench export``
writes a sweep of the database the same way (``write_runs``, from app.sweeps.exports), with what its jobs hold
beyond the spec (``JobLayout``): a cell's folders past the spec's repeats (paired starts added later), and
``pairs.json``, each paired job's folder name -> its pair id and order.

``folder.json`` (``FOLDER_FILE``) holds the folder's identity, ``{"folder_id": "<32 hex digits>"}``: random from
``expand`` on, or the identity of the sweep ``export`` writes. Runs cannot tell a folder that none of its cells has run
yet from another of the same spec; its identity can, so that an import of it before its cells ran and one after are
one sweep (app.sweeps.imports). It is a file of its own because ``sweep.json`` is a ``SweepSpec``, which takes no other
key. A folder without it (an older ``expand``) reads as having none.
"""

import errno
import hashlib
import itertools
import json
import os
import secrets
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)

from app import files
from app.errors import InputError
from app.schemas import times
from app.schemas.cell import CellResult, CellSpec
from app.schemas.sweep import SweepSpec
from app.sweeps import imports, matrix
from app.sweeps import service as sweeps
from app.sweeps.imports import FOLDER_FILE, SPEC_ONLY, JobLayout, RanJob, cell_dir_name
from runners.offline import FINISHED_AT_FORMAT, exit_record
from runners.outcome import outcome_of

PAIRS = "pairs.json"


@dataclass(frozen=True)
class Folder:
    """What ``read_folder`` found: the sweep, every cell that ran, a digest of the folder's content, what its
    jobs hold beyond the spec, and its identity (None for a folder without ``folder.json``)."""

    spec: SweepSpec
    ran: list[RanJob]
    digest: str
    layout: JobLayout
    folder_id: str | None = None


def new_folder_id() -> str:
    """A new folder's identity: 128 random bits, so that no two folders expanded anywhere share one."""
    return secrets.token_hex(16)


def write_cells(spec: SweepSpec, folder: Path, folder_id: str | None = None) -> int:
    """Write ``sweep.json``, ``folder.json`` and one ``cells/NAME/spec.json`` per cell and repeat; returns the cell count.

    ``folder_id`` is the folder's identity: a new one unless given (``export`` gives its sweep's). Expanding again into
    a folder makes it another folder, with a new identity, as its ``sweep.json`` may be another sweep's.
    """
    cells = matrix.expand(spec)
    (folder / "cells").mkdir(parents=True, exist_ok=True)
    (folder / "sweep.json").write_text(json.dumps(spec.model_dump(mode="json"), indent=2))
    (folder / FOLDER_FILE).write_text(json.dumps(_Identity(folder_id=folder_id or new_folder_id()).model_dump(), indent=2))
    for cell in cells:
        for repeat in range(spec.repeats):
            cell_dir = folder / "cells" / cell_dir_name(cell.index, repeat)
            cell_dir.mkdir(exist_ok=True)
            (cell_dir / "spec.json").write_text(json.dumps(matrix.canonical(cell.spec), indent=2))
    return len(cells)


def write_runs(spec: SweepSpec, folder: Path, ran: Sequence[RanJob], cut_logs: Mapping[tuple[int, int], str],
               layout: JobLayout = SPEC_ONLY, folder_id: str | None = None) -> None:
    """The folder ``read_folder`` reads back as these runs: ``write_cells``'s files, and beside each run's
    spec its ``cell.log``, ``exit.json`` and (when it has one) ``result.json``. ``folder_id`` is the identity of the
    folder the runs came from (a new one when None), so that the folder, imported elsewhere, is still that folder.

    ``cut_logs`` are logs of cells that did not run to an end, written without ``exit.json`` as
    runners/offline.py leaves a cell its budget cut. ``layout``'s repeats past the spec's get their folders and
    spec, its pairs ``pairs.json``. Written whole or not at all: into a new folder beside ``folder``, then renamed
    to it. Raises FileExistsError for a folder that is not empty or a symbolic link (written through, it would put
    the files wherever it points), OSError for a folder that cannot be written (nothing is left behind).
    """
    if folder.is_symlink():
        raise FileExistsError(f"{folder} is a symbolic link")
    if folder.exists() and any(folder.iterdir()):
        raise FileExistsError(f"{folder} is not empty")
    if folder.parent.exists() and not folder.parent.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(folder.parent))
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".{folder.name}.export-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        _write_runs(spec, staging, ran, cut_logs, layout, folder_id)
        # Onto an empty folder or none; another that appeared meanwhile is not replaced.
        os.rename(staging, folder)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise FileExistsError(f"{folder} is not empty") from None
        raise


def _write_runs(spec: SweepSpec, folder: Path, ran: Sequence[RanJob], cut_logs: Mapping[tuple[int, int], str],
                layout: JobLayout, folder_id: str | None) -> None:
    write_cells(spec, folder, folder_id)
    cells = {cell.index: cell for cell in matrix.expand(spec)}
    for cell_index, repeats in layout.repeats.items():
        for repeat in range(spec.repeats, repeats):
            cell_dir = folder / "cells" / cell_dir_name(cell_index, repeat)
            cell_dir.mkdir()
            (cell_dir / "spec.json").write_text(json.dumps(matrix.canonical(cells[cell_index].spec), indent=2))
    if layout.pairs:
        pairs = {cell_dir_name(*key): {"pair_id": pair_id, "pair_order": order}
                 for key, (pair_id, order) in sorted(layout.pairs.items())}
        (folder / PAIRS).write_text(json.dumps(pairs, indent=2))
    for (cell_index, repeat), log in cut_logs.items():
        (folder / "cells" / cell_dir_name(cell_index, repeat) / "cell.log").write_bytes(log.encode())
    for run in ran:
        cell_dir = folder / "cells" / cell_dir_name(run.cell_index, run.repeat)
        outcome = run.outcome
        (cell_dir / "cell.log").write_bytes(run.log.encode())
        if outcome.result is not None:
            (cell_dir / "result.json").write_text(outcome.result.model_dump_json(indent=2))
        exit_info = exit_record(exit_code=outcome.exit_code, signal=outcome.signal, timed_out=outcome.timed_out,
                                duration_s=outcome.duration_s, finished_at=run.finished_at)
        (cell_dir / "exit.json").write_text(json.dumps(exit_info))


_EXAMPLE_TIME = "2026-11-30T01:04:59Z"


class ExitRecord(BaseModel):
    """``exit.json`` as runners/offline.py writes it (``exit_record``); ``finished_at`` is missing in older folders."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    exit_code: StrictInt | None
    signal: StrictInt | None
    timed_out: StrictBool
    duration_s: StrictFloat = Field(ge=0)
    finished_at: datetime | None = None

    @field_validator("finished_at", mode="before")
    @classmethod
    def _written_so(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError(f"not a time such as {_EXAMPLE_TIME} (UTC, to the second)")
        try:
            when = datetime.strptime(value, FINISHED_AT_FORMAT).replace(tzinfo=UTC)
        except ValueError:
            raise ValueError(f"{value[:40]!r} is not a time such as {_EXAMPLE_TIME} (UTC, to the second)") from None
        return times.plausible(when)


class _Pair(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pair_id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
    pair_order: Annotated[int, Field(ge=0, le=1)]


class _Pairs(RootModel[dict[str, _Pair]]):
    """``pairs.json``: a job's folder name (``c0001-r2``) -> its pair."""


class _Identity(BaseModel):
    """``folder.json``: the folder's identity, as ``new_folder_id`` makes it (32 lowercase hex digits), and nothing else.
    It may come from a host that is not trusted and is stored as the sweep's ``folder_id`` (at most 32 characters)."""

    model_config = ConfigDict(extra="forbid")

    folder_id: Annotated[StrictStr, Field(max_length=32, pattern=r"^[0-9a-f]{32}$")]


def read_folder(folder: Path) -> Folder:
    """The sweep, every cell that ran (``exit.json`` present), a digest of the folder's content, the cells'
    repeats past the spec's (each a folder holding a ``spec.json``) and pairs (``pairs.json``), and the folder's
    identity (``folder.json``).

    Equal digests mean the same files: a folder imported again as it was is recognised by it at once; the same runs
    in other bytes (a log edited, a result rewritten) are recognised by their times (``app.sweeps.imports``), and a
    folder run further since by its identity. The identity is part of the digest: two folders expanded from one spec,
    before any of their cells ran, are two folders. The folder may come
    from a host that is not trusted: its files are read by app.files' rules (regular files inside it,
    never through a link, within the service's size limits) and validated. Raises FileRefused naming the
    file (and field) of the first one that is refused; nothing is read past it.
    """
    found = files.read_inside(folder, "sweep.json", limit=files.body_limit())
    if found is None:
        raise files.FileRefused(f"{folder / 'sweep.json'}: no such file (is {folder} a folder made by `draftbench expand`?)")
    spec = files.validated(SweepSpec, found.data, name=folder / "sweep.json")
    try:
        sweeps.job_count(spec, max_jobs=imports.IMPORT_LIMIT)
    except InputError as exc:
        raise files.FileRefused(f"{folder / 'sweep.json'}: {'.'.join(map(str, exc.loc[1:]))}: {exc.msg}") from None
    digest = hashlib.sha256(found.data)
    folder_id = _read_identity(folder)
    if folder_id is not None:
        # Absent, it adds nothing: an older folder keeps the digest it was imported under.
        digest.update(f"\n{FOLDER_FILE}\n{folder_id}".encode())
    ran, names, repeats = [], {}, {}
    for cell in matrix.expand(spec):
        for repeat in _repeats(folder, cell.index, spec.repeats):
            name = cell_dir_name(cell.index, repeat)
            names[name] = (cell.index, repeat)
            if repeat >= spec.repeats:
                repeats[cell.index] = repeat + 1
                digest.update(f"\n{name}/spec.json\n".encode())
            exit_file = files.read_inside(folder, f"cells/{name}/exit.json", limit=files.body_limit())
            if exit_file is None:
                continue
            result = files.read_inside(folder, f"cells/{name}/result.json", limit=files.body_limit())
            log = files.read_inside(folder, f"cells/{name}/cell.log", limit=files.log_limit())
            for file, content in (("exit.json", exit_file), ("result.json", result), ("cell.log", log)):
                digest.update(f"\n{name}/{file}\n".encode())
                digest.update(content.data if content else b"")
            ran.append(_ran(folder / "cells" / name, cell.index, repeat, cell.spec, exit_file, result, log))
    _refuse_strays(folder, names)
    pairs = _read_pairs(folder, names)
    if pairs:
        digest.update(f"\n{PAIRS}\n{json.dumps(sorted(pairs.items()))}".encode())
    return Folder(spec=spec, ran=ran, digest=digest.hexdigest(), layout=JobLayout(repeats=repeats, pairs=pairs),
                  folder_id=folder_id)


def _read_identity(folder: Path) -> str | None:
    """``folder.json``'s ``folder_id``; None when the folder has no such file. FileRefused naming the file and the
    field when it is not one ``new_folder_id`` makes (another type, too long, not lowercase hex, another key)."""
    found = files.read_inside(folder, FOLDER_FILE, limit=files.body_limit())
    if found is None:
        return None
    return files.validated(_Identity, found.data, name=folder / FOLDER_FILE).folder_id


def _repeats(folder: Path, cell_index: int, spec_repeats: int) -> Iterator[int]:
    """The spec's repeats of a cell, then those past them whose folder holds a ``spec.json``, up to the first without."""
    yield from range(spec_repeats)
    for repeat in itertools.count(spec_repeats):
        if files.read_inside(folder, f"cells/{cell_dir_name(cell_index, repeat)}/spec.json", limit=files.body_limit()) is None:
            return
        yield repeat


def _refuse_strays(folder: Path, names: Mapping[str, tuple[int, int]]) -> None:
    """FileRefused for an entry of ``cells/`` that no job of the sweep has: a cell index or repeat ``sweep.json`` lacks
    (``c0099-r0``, a repeat past a missing one), or any other name; imported, its runs would be lost unseen."""
    strays = sorted(set(files.names_inside(folder, "cells") or []) - set(names))
    if strays:
        last = max(names, key=names.__getitem__, default="none")
        raise files.FileRefused(
            f"{folder / 'cells' / strays[0]}: no job of the sweep has this folder (its jobs' folders run c0000-r0 to "
            f"{last}; a repeat past the sweep's needs each one before it){f' (and {len(strays) - 1} more)' if len(strays) > 1 else ''}")


def _read_pairs(folder: Path, names: Mapping[str, tuple[int, int]]) -> dict[tuple[int, int], tuple[str, int]]:
    """``pairs.json`` as (cell index, repeat) -> (pair id, order); FileRefused for a name no cell folder has."""
    found = files.read_inside(folder, PAIRS, limit=files.body_limit())
    if found is None:
        return {}
    pairs = files.validated(_Pairs, found.data, name=folder / PAIRS).root
    unknown = sorted(set(pairs) - set(names))
    if unknown:
        raise files.FileRefused(f"{folder / PAIRS}: {unknown[0]}: no job of the sweep has this folder")
    return {names[name]: (pair.pair_id, pair.pair_order) for name, pair in pairs.items()}


def _ran(
    cell_dir: Path, cell_index: int, repeat: int, spec: CellSpec,
    exit_file: files.Content, result: files.Content | None, log_file: files.Content | None,
) -> RanJob:
    exit_info = files.validated(ExitRecord, exit_file.data, name=cell_dir / "exit.json")
    # Bytes, as the worker reads its cells' logs: text mode would turn vLLM's progress bars' \r into \n.
    log = log_file.data.decode(errors="replace") if log_file else ""
    ran_to_end = exit_info.exit_code == 0 and not exit_info.timed_out
    if ran_to_end and result is not None:
        # Refused here with its file's name; the worker instead records a cell that wrote such a result as failed.
        files.validated(CellResult, result.data, name=cell_dir / "result.json")
    try:
        outcome = outcome_of(
            spec,
            log=log,
            result_json=result.data if result else None,
            exit_code=exit_info.exit_code,
            signal=exit_info.signal,
            timed_out=exit_info.timed_out,
            duration_s=exit_info.duration_s,
        )
    except ValidationError as exc:
        raise files.FileRefused(f"{cell_dir / 'exit.json'}: {files.describe(exc)}") from None
    # offline.py records when each cell finished; older folders without it take the file's time.
    finished_at = exit_info.finished_at
    if finished_at is None:
        try:
            finished_at = imports.modified(exit_file.mtime)
        except ValueError as exc:
            raise files.FileRefused(f"{cell_dir / 'exit.json'}: no finished_at, and its modification time {exc}") from None
    try:
        started_at = imports.started(finished_at, exit_info.duration_s)
    except ValueError as exc:
        raise files.FileRefused(f"{cell_dir / 'exit.json'}: duration_s: {exc}") from None
    return RanJob(
        cell_index=cell_index,
        repeat=repeat,
        outcome=outcome,
        log=log,
        started_at=started_at,
        finished_at=finished_at,
    )
