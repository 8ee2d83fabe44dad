"""``draftbench import`` of a folder from a host that may not be trusted: a link is never followed, a file is never
read past the service's limits, and a malformed file is one line naming it and its field, with nothing stored.

The folder is the real H200 one (tests/data/h200-matrix), copied and then spoiled one file at a time.
"""

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app import db
from app.models import JobLog, Result, Sweep
from tests.cli.test_errors import one_line, run

H200 = Path(__file__).resolve().parents[1] / "data" / "h200-matrix"
CELL = "cells/c0000-r0"
SECRET = "dbk_the-admin-token-must-not-leak"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(H200, copy)
    return copy


def _import(folder: Path, url: str, **env: str) -> subprocess.CompletedProcess:
    return run("import", str(folder), "--database-url", url, env={"DRAFTBENCH_TOKEN": SECRET, **env})


def _refused(done: subprocess.CompletedProcess, url: str, *names: str) -> str:
    """The one line of a refused import, after checking it names ``names`` and the database holds nothing."""
    line = one_line(done)
    assert line.startswith("draftbench: nothing imported: "), line
    for name in names:
        assert name in line, (name, line)
    assert SECRET not in done.stdout + done.stderr
    db.upgrade(url)
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.scalar(select(func.count()).select_from(Sweep)) == 0
            assert conn.scalar(select(func.count()).select_from(JobLog)) == 0
    finally:
        engine.dispose()
    return line


def _elsewhere(folder: Path, relative: str) -> Path:
    """A copy of ``folder/relative`` outside the folder (the same content, so only the link is wrong)."""
    outside = folder.parent / "outside" / relative
    outside.parent.mkdir(parents=True, exist_ok=True)
    (shutil.copytree if (folder / relative).is_dir() else shutil.copy)(folder / relative, outside)
    return outside


@pytest.mark.parametrize(("relative", "target"), [
    (f"{CELL}/cell.log", "/proc/self/environ"),
    (f"{CELL}/cell.log", "/etc/passwd"),
    (f"{CELL}/cell.log", None),
    (f"{CELL}/result.json", None),
    (f"{CELL}/exit.json", None),
    ("sweep.json", None),
    (CELL, None),
    ("cells", None),
])
def test_import_refuses_a_symlink_anywhere_in_the_folder(folder: Path, db_url: str, relative: str, target: str | None) -> None:
    pointed = Path(target) if target else _elsewhere(folder, relative)
    (shutil.rmtree if (folder / relative).is_dir() else os.unlink)(folder / relative)
    (folder / relative).symlink_to(pointed)
    line = _refused(_import(folder, db_url), db_url, str(folder / relative), "symbolic link")
    assert "root:" not in line and "DRAFTBENCH_" not in line


def test_import_refuses_a_fifo_where_a_log_should_be_without_waiting_on_it(folder: Path, db_url: str) -> None:
    (folder / CELL / "cell.log").unlink()
    os.mkfifo(folder / CELL / "cell.log")
    _refused(_import(folder, db_url), db_url, f"{CELL}/cell.log", "a FIFO, not a regular file")


def test_import_holds_a_log_to_the_limit_of_a_workers_log_upload(folder: Path, db_url: str) -> None:
    # The service refuses a worker's log over DRAFTBENCH_MAX_LOG_BYTES (413); an import takes no more.
    (folder / CELL / "cell.log").write_bytes(b"x" * 20_001)
    done = _import(folder, db_url, DRAFTBENCH_MAX_LOG_BYTES="20000")
    _refused(done, db_url, f"{CELL}/cell.log", "20001 bytes, over the limit of 20000 (DRAFTBENCH_MAX_LOG_BYTES)")


def test_import_holds_json_files_to_the_apis_body_limit(folder: Path, sqlite_url: str) -> None:
    # Valid JSON still: a megabyte of spaces after the result.
    result = folder / CELL / "result.json"
    result.write_bytes(result.read_bytes() + b" " * (1024 * 1024))
    _refused(_import(folder, sqlite_url), sqlite_url, f"{CELL}/result.json", "over the limit of 1048576 (DRAFTBENCH_MAX_BODY_BYTES)")


def _exit_with(**fields: object) -> Callable[[Path], None]:
    def spoil(folder: Path) -> None:
        path = folder / CELL / "exit.json"
        record = json.loads(path.read_text()) | fields
        path.write_text(json.dumps({k: v for k, v in record.items() if v is not _MISSING}))
    return spoil


def _write(relative: str, data: bytes) -> Callable[[Path], None]:
    return lambda folder: (folder / relative).write_bytes(data)


def _result_with(**fields: object) -> Callable[[Path], None]:
    def spoil(folder: Path) -> None:
        path = folder / CELL / "result.json"
        path.write_text(json.dumps(json.loads(path.read_text()) | fields))
    return spoil


_MISSING = object()


def _older_folder_modified_in_2099(folder: Path) -> None:
    # Folders of older offline.py runs have no finished_at: the file's modification time stands for it.
    _exit_with(finished_at=_MISSING)(folder)
    stamp = datetime(2099, 1, 1, tzinfo=UTC).timestamp()
    os.utime(folder / CELL / "exit.json", (stamp, stamp))

DEEP = b"[" * 100_000 + b"]" * 100_000
TOMORROW = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
MALFORMED = {
    "exit.json without duration_s": (_exit_with(duration_s=_MISSING), "exit.json", "duration_s"),
    "exit.json without exit_code": (_exit_with(exit_code=_MISSING), "exit.json", "exit_code"),
    "a duration of 1e300 s": (_exit_with(duration_s=1e300), "exit.json", "duration_s"),
    "a negative duration": (_exit_with(duration_s=-5), "exit.json", "duration_s"),
    "a duration as text": (_exit_with(duration_s="156"), "exit.json", "duration_s"),
    "a duration of NaN": (_exit_with(duration_s=float("nan")), "exit.json", "duration_s"),
    "a duration of 1e400": (_write(f"{CELL}/exit.json", b'{"exit_code": 0, "signal": null, "timed_out": false, "duration_s": 1e400}'),
                            "exit.json", "duration_s"),
    "finished at 9999-12-31": (_exit_with(finished_at="9999-12-31T00:00:00Z"), "exit.json", "finished_at"),
    "finished tomorrow": (_exit_with(finished_at=TOMORROW), "exit.json", "finished_at"),
    "finished in 1999": (_exit_with(finished_at="1999-12-31T23:59:59Z"), "exit.json", "finished_at"),
    "finished 'yesterday'": (_exit_with(finished_at="yesterday"), "exit.json", "finished_at"),
    "finished at a number": (_exit_with(finished_at=253402214400), "exit.json", "finished_at"),
    "no finished_at and modified in 2099": (_older_folder_modified_in_2099, "exit.json", "modification time 2099-01-01T00:00:00Z"),
    "started before 2000": (_exit_with(duration_s=1e9), "exit.json", "duration_s"),
    "an exit code as text": (_exit_with(exit_code="0"), "exit.json", "exit_code"),
    "an exit code of 10**30": (_exit_with(exit_code=10**30), "exit.json", "exit_code"),
    "signal 999": (_exit_with(exit_code=None, signal=999), "exit.json", "signal"),
    "timed_out as text": (_exit_with(timed_out="no"), "exit.json", "timed_out"),
    "exit.json a list": (_write(f"{CELL}/exit.json", b"[0, null, false]"), "exit.json", "object"),
    "exit.json binary garbage": (_write(f"{CELL}/exit.json", bytes(range(256))), "exit.json", "Invalid JSON"),
    "exit.json not UTF-8": (_write(f"{CELL}/exit.json", b'{"exit_code": 0, "x": "\xff\xfe"}'), "exit.json", "Invalid JSON"),
    "exit.json nested 100,000 deep": (_write(f"{CELL}/exit.json", DEEP), "exit.json", "recursion limit"),
    "exit.json empty": (_write(f"{CELL}/exit.json", b""), "exit.json", "Invalid JSON"),
    "no sweep.json": (lambda folder: (folder / "sweep.json").unlink(), "sweep.json", "no such file"),
    "sweep.json garbage": (_write("sweep.json", b"\x00\x01garbage"), "sweep.json", "Invalid JSON"),
    "sweep.json nested 100,000 deep": (_write("sweep.json", DEEP), "sweep.json", "recursion limit"),
    "sweep.json a string": (_write("sweep.json", b'"sweep"'), "sweep.json", "object"),
    "sweep.json over the import's job limit": (
        lambda folder: (folder / "sweep.json").write_text(
            json.dumps(json.loads((folder / "sweep.json").read_text()) | {"repeats": 10_000})),
        "sweep.json", "repeats"),
    "result.json tokens_per_s as text": (_result_with(tokens_per_s="fast"), "result.json", "tokens_per_s"),
    "result.json tokens_per_s NaN": (_result_with(tokens_per_s=float("nan")), "result.json", "tokens_per_s"),
    "result.json nested 100,000 deep": (_write(f"{CELL}/result.json", DEEP), "result.json", "recursion limit"),
    "result.json a number": (_write(f"{CELL}/result.json", b"42"), "result.json", "object"),
    "result.json truncated": (_write(f"{CELL}/result.json", b'{"tokens_per_s": 1'), "result.json", "Invalid JSON"),
    "exit.json giving a key twice": (
        _write(f"{CELL}/exit.json", b'{"exit_code": 0, "signal": null, "timed_out": false, "duration_s": 156.5, '
                                    b'"duration_s": 1.0, "finished_at": "2026-11-30T01:04:59Z"}'),
        "exit.json", "key 'duration_s' is given twice"),
    "result.json giving a key twice": (
        lambda folder: (folder / CELL / "result.json").write_bytes(
            (folder / CELL / "result.json").read_bytes().rstrip().removesuffix(b"}") + b', "tokens_per_s": 1e6}'),
        "result.json", "key 'tokens_per_s' is given twice"),
    "sweep.json giving a key twice": (
        lambda folder: (folder / "sweep.json").write_bytes(
            (folder / "sweep.json").read_bytes().replace(b'"repeats": 1,', b'"repeats": 1, "repeats": 1,')),
        "sweep.json", "key 'repeats' is given twice"),
    "a run of a cell sweep.json lacks": (
        lambda folder: shutil.copytree(folder / CELL, folder / "cells" / "c0099-r0"), "cells/c0099-r0", "no job of the sweep"),
    "a repeat past one that is missing": (
        lambda folder: shutil.copytree(folder / CELL, folder / "cells" / "c0000-r5"), "cells/c0000-r5", "no job of the sweep"),
    "a cell folder named with dots": (
        lambda folder: (folder / "cells" / "..c0000-r0").mkdir(), "cells/..c0000-r0", "no job of the sweep"),
    "pairs.json naming no cell folder": (
        _write("pairs.json", b'{"c0099-r7": {"pair_id": "' + b"a" * 32 + b'", "pair_order": 0}}'), "pairs.json", "c0099-r7"),
    "pairs.json a pair id of 5 digits": (
        _write("pairs.json", b'{"c0000-r0": {"pair_id": "12345", "pair_order": 0}}'), "pairs.json", "pair_id"),
    "pairs.json a third place in a pair": (
        _write("pairs.json", b'{"c0000-r0": {"pair_id": "' + b"a" * 32 + b'", "pair_order": 2}}'), "pairs.json", "pair_order"),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_a_malformed_file_is_one_line_naming_it_and_its_field(folder: Path, sqlite_url: str, case: str) -> None:
    spoil, file, field = MALFORMED[case]
    spoil(folder)
    line = _refused(_import(folder, sqlite_url), sqlite_url, file, field)
    assert "Traceback" not in line


@pytest.mark.parametrize("case", ["finished at 9999-12-31", "exit.json without duration_s"])
def test_a_malformed_file_leaves_nothing_in_either_database(folder: Path, db_url: str, case: str) -> None:
    spoil, file, field = MALFORMED[case]
    spoil(folder)
    _refused(_import(folder, db_url), db_url, f"{folder / CELL / file}", field)


@pytest.mark.parametrize("field", ["output_tokens", "num_requests"])
def test_an_integer_past_what_the_database_holds_is_one_line_and_nothing_is_stored(folder: Path, db_url: str, field: str) -> None:
    # Refused by result.json's schema or, past it, by the database (SQLite: OverflowError; PostgreSQL: out of range).
    _result_with(**{field: 10**30})(folder)
    _refused(_import(folder, db_url), db_url)


def _stored(url: str) -> tuple[int, int, int]:
    """Sweeps, results and logs in the database."""
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            return tuple(conn.scalar(select(func.count()).select_from(model)) for model in (Sweep, Result, JobLog))
    finally:
        engine.dispose()


def test_the_same_runs_edited_after_their_import_are_one_line_naming_the_sweep_and_the_files(folder: Path, db_url: str) -> None:
    first = _import(folder, db_url)
    assert first.returncode == 0 and first.stdout.startswith("imported sweep 1 'h200-backends-x-graph-modes'"), first.stderr
    identical = _import(folder, db_url)
    assert (identical.returncode, identical.stdout) == (0, "already imported as sweep 1 'h200-backends-x-graph-modes': nothing added\n")
    with (folder / CELL / "cell.log").open("a") as log:
        log.write("edited\n")
    _result_with(tokens_per_s=1.0)(folder)
    line = one_line(_import(folder, db_url))
    assert line == (
        f"draftbench: nothing imported: {folder}: 18 of its 18 runs are stored already, as sweep 1 "
        f"'h200-backends-x-graph-modes', and it differs from that sweep in {CELL}/cell.log, {CELL}/result.json: a run "
        "is stored once, and a stored run is never replaced")
    assert SECRET not in line and _stored(db_url) == (1, 18, 18)


def test_a_folder_run_further_after_its_import_adds_its_new_runs_once(folder: Path, db_url: str) -> None:
    """The run's budget cut the last cell, imported so; that cell ran later (``--only-missing``) in the same folder."""
    last = folder / "cells" / "c0017-r0" / "exit.json"
    kept = last.read_bytes()
    last.unlink()
    first = _import(folder, db_url)
    assert (first.returncode, first.stdout) == (0, "imported sweep 1 'h200-backends-x-graph-modes': 17 of 18 jobs ran\n")
    last.write_bytes(kept)
    added = _import(folder, db_url)
    assert (added.returncode, added.stdout) == (0, "added 1 run to sweep 1 'h200-backends-x-graph-modes': 18 of 18 jobs ran\n")
    again = _import(folder, db_url)
    assert (again.returncode, again.stdout) == (0, "already imported as sweep 1 'h200-backends-x-graph-modes': nothing added\n")
    assert _stored(db_url) == (1, 18, 18)
