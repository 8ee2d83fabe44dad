"""A folder's own identity (``folder.json``, from ``draftbench expand`` on): one folder is one sweep, whether it was
imported before any of its cells ran or after, here or, exported, elsewhere.

The folders are expanded from the H200 matrix's spec cut to its first 4 cells (FLASH_ATTN x (NONE,
FULL_DECODE_ONLY) x (draft_model, dflash)), and a cell "runs" as runners/offline.py leaves it: the real H200
``cell.log``, ``result.json`` and ``exit.json`` of that cell (tests/data/h200-matrix) beside its ``spec.json``.
"""

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app import db
from app.models import Job, JobLog, Result, Sweep
from app.schemas.sweep import SweepSpec
from app.sweeps import exports
from app.sweeps import service as sweeps
from app.sweeps.imports import FOLDER_FILE, Imported, RunsStored, import_sweep
from runners.folders import read_folder, write_cells, write_runs
from tests.cli.test_errors import one_line, run

H200 = Path(__file__).resolve().parents[1] / "data" / "h200-matrix"
NAME = "h200-backends-x-graph-modes"
FINISHED_AT = "%Y-%m-%dT%H:%M:%SZ"


def _four_cells() -> SweepSpec:
    spec = json.loads((H200 / "sweep.json").read_text())
    return SweepSpec.model_validate(spec | {"attention_backends": ["FLASH_ATTN"], "cudagraph_modes": ["NONE", "FULL_DECODE_ONLY"]})


def _expand(tmp_path: Path, name: str = "run") -> Path:
    folder = tmp_path / name
    assert write_cells(_four_cells(), folder) == 4
    return folder


def _run(folder: Path, *cells: int, later: timedelta = timedelta(0)) -> None:
    """Each cell run in ``folder`` as the H200 ran it, finished ``later`` than it did (another run of it)."""
    for cell in cells:
        name = f"cells/c{cell:04d}-r0"
        for file in ("cell.log", "result.json", "exit.json"):
            shutil.copy(H200 / name / file, folder / name / file)
        record = json.loads((folder / name / "exit.json").read_text())
        finished = datetime.strptime(record["finished_at"], FINISHED_AT).replace(tzinfo=UTC) + later
        (folder / name / "exit.json").write_text(json.dumps(record | {"finished_at": finished.strftime(FINISHED_AT)}))


def _import(session, folder: Path) -> Imported:
    found = read_folder(folder)
    return import_sweep(session=session, spec=found.spec, ran=found.ran, digest=found.digest, layout=found.layout,
                        folder_id=found.folder_id)


def _outcome(imported: Imported) -> tuple[int, bool, int]:
    return imported.sweep.id, imported.created, imported.added


def _counts(session) -> tuple[int, int, int, int]:
    """Sweeps, jobs, results and logs stored."""
    return tuple(session.scalar(select(func.count()).select_from(model)) for model in (Sweep, Job, Result, JobLog))


def _folder_id(folder: Path) -> str:
    return json.loads((folder / FOLDER_FILE).read_text())["folder_id"]


def _as_stored(sweep: Sweep) -> tuple:
    """When the sweep began, and each job's state, attempts, times and result."""
    return sweep.created_at, [(job.cell_index, job.state.value, job.attempts, job.max_attempts, job.started_at,
                               job.finished_at, job.result and job.result.tokens_per_s) for job in sweep.jobs]


def test_a_folder_imported_before_any_of_its_cells_ran_stays_one_sweep_as_they_run(migrated_sessions, tmp_path: Path) -> None:
    """The bug: imported with no run to be known by, then run and imported again, the folder became a second sweep
    beside the empty one, whose jobs stayed queued."""
    folder = _expand(tmp_path)
    with migrated_sessions.begin() as session:
        empty = _import(session, folder)
        assert (_outcome(empty), _counts(session)) == ((1, True, 0), (1, 4, 0, 0))
        assert [(job.state.value, job.max_attempts) for job in empty.sweep.jobs] == [("queued", 0)] * 4
    _run(folder, 0, 1)
    with migrated_sessions.begin() as session:
        assert (_outcome(_import(session, folder)), _counts(session)) == ((1, False, 2), (1, 4, 2, 2))
    _run(folder, 2, 3)
    with migrated_sessions.begin() as session:
        whole = _import(session, folder)
        assert (_outcome(whole), _counts(session)) == ((1, False, 2), (1, 4, 4, 4))
        assert sweeps.summary(session=session, sweep=whole.sweep).state == "finished"
        assert whole.sweep.folder_id == _folder_id(folder)
        stored = _as_stored(whole.sweep)
    # Nothing new: the same sweep, nothing added.
    with migrated_sessions.begin() as session:
        again = _import(session, folder)
        assert (_outcome(again), _counts(session), _as_stored(again.sweep)) == ((1, False, 0), (1, 4, 4, 4), stored)
    # As the whole folder imported at once into a database of its own: the sweep began when its first run did, not
    # when its folder was first imported.
    whole_url = f"sqlite:///{tmp_path / 'whole.db'}"
    db.upgrade(whole_url)
    engine = db.make_engine(whole_url)
    try:
        with db.make_sessionmaker(engine).begin() as session:
            at_once = _import(session, folder)
            assert at_once.created and _as_stored(at_once.sweep) == stored
    finally:
        engine.dispose()
    assert stored[0] == min(job[4] for job in stored[1])


def _edit_log(folder: Path) -> None:
    with (folder / "cells" / "c0000-r0" / "cell.log").open("a") as log:
        log.write("a line added after the run\n")


def _rerun(folder: Path) -> None:
    _run(folder, 0, later=timedelta(hours=5))


def _rename(folder: Path) -> None:
    path = folder / "sweep.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"name": "renamed-after-the-run"}))


def _pair(folder: Path) -> None:
    (folder / "pairs.json").write_text(json.dumps({"c0000-r0": {"pair_id": "a" * 32, "pair_order": 0}}))


NEW_RUN = "cells/c0001-r0 (not run in sweep 1)"


@pytest.mark.parametrize(("edit", "held", "named"), [
    (_edit_log, 1, ["cells/c0000-r0/cell.log", NEW_RUN]),
    (_rerun, 0, ["cells/c0000-r0/exit.json (another run than sweep 1's)", NEW_RUN]),
    (_rename, 1, ["sweep.json", NEW_RUN]),
    (_pair, 1, [NEW_RUN, "pairs.json"]),
], ids=["a stored run's log", "a stored run run again", "the sweep's name", "a pair"])
def test_the_same_folder_with_anything_changed_but_new_runs_is_refused_naming_the_sweep(
        migrated_sessions, tmp_path: Path, edit, held: int, named: list[str]) -> None:
    folder = _expand(tmp_path)
    with migrated_sessions.begin() as session:
        _import(session, folder)
    _run(folder, 0)
    with migrated_sessions.begin() as session:
        assert _outcome(_import(session, folder)) == (1, False, 1)
    edit(folder)
    _run(folder, 1)  # a new run beside the change is not added either
    with migrated_sessions.begin() as session:
        with pytest.raises(RunsStored) as refused:
            _import(session, folder)
        assert _counts(session) == (1, 4, 1, 1)
    assert refused.value.differences == named
    assert str(refused.value) == (
        f"it is the folder imported as sweep 1 '{NAME}' (its folder.json says so), which holds {held} of its 2 runs, and "
        f"it differs from that sweep in {', '.join(refused.value.differences)}: a run is stored once, and a stored run "
        "is never replaced")
    with migrated_sessions.begin() as session:
        stored = session.get_one(Sweep, 1)
        assert [job.state.value for job in stored.jobs] == ["succeeded", "queued", "queued", "queued"]


def test_the_same_folder_with_another_spec_before_any_cell_ran_is_refused(migrated_sessions, tmp_path: Path) -> None:
    """Without runs, the identity alone names the sweep: another sweep.json in it is not another sweep."""
    folder = _expand(tmp_path)
    with migrated_sessions.begin() as session:
        _import(session, folder)
    _rename(folder)
    with migrated_sessions.begin() as session:
        with pytest.raises(RunsStored, match=rf"^it is the folder imported as sweep 1 '{NAME}' .*, which holds 0 of "
                                             r"its 0 runs, and it differs from that sweep in sweep.json: "):
            _import(session, folder)
        assert _counts(session) == (1, 4, 0, 0)


def test_two_folders_expanded_from_one_spec_are_two_sweeps(migrated_sessions, tmp_path: Path) -> None:
    first, second = _expand(tmp_path, "first"), _expand(tmp_path, "second")
    assert _folder_id(first) != _folder_id(second)
    with migrated_sessions.begin() as session:
        assert _outcome(_import(session, first)) == (1, True, 0)
        assert _outcome(_import(session, second)) == (2, True, 0)
    # Each run on a host of its own, at its own times: each adds to its own sweep.
    _run(first, 0, 1, 2, 3)
    _run(second, 0, 1, 2, 3, later=timedelta(days=1))
    with migrated_sessions.begin() as session:
        assert _outcome(_import(session, second)) == (2, False, 4)
        assert _outcome(_import(session, first)) == (1, False, 4)
        assert _counts(session) == (2, 8, 8, 8)


def test_a_copy_of_a_folder_run_again_elsewhere_is_refused_not_stored_twice(migrated_sessions, tmp_path: Path) -> None:
    """A copy keeps the identity: it is the same folder, and its other runs of the same jobs are not that sweep's."""
    folder = _expand(tmp_path)
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    _run(folder, 0, 1)
    _run(copy, 0, 1, later=timedelta(days=1))
    with migrated_sessions.begin() as session:
        _import(session, folder)
    with migrated_sessions.begin() as session:
        with pytest.raises(RunsStored) as refused:
            _import(session, copy)
        assert _counts(session) == (1, 4, 2, 2)
    assert refused.value.differences == [f"cells/c000{cell}-r0/exit.json (another run than sweep 1's)" for cell in (0, 1)]


def test_a_folder_without_an_identity_is_known_by_its_runs_alone_as_before(migrated_sessions, tmp_path: Path) -> None:
    """A folder of an older ``expand`` (no folder.json): its digest is what it was, and imported before any of its
    cells ran, then after, it makes a second sweep, as it always did."""
    folder = _expand(tmp_path)
    with_identity = read_folder(folder)
    (folder / FOLDER_FILE).unlink()
    found = read_folder(folder)
    assert found.folder_id is None and found.digest != with_identity.digest
    twin = _expand(tmp_path, "twin")
    (twin / FOLDER_FILE).unlink()
    assert read_folder(twin).digest == found.digest
    with migrated_sessions.begin() as session:
        first = _import(session, folder)
        assert _outcome(first) == (1, True, 0) and first.sweep.folder_id is None
        assert _outcome(_import(session, twin)) == (1, False, 0)  # the same bytes: the same digest
    _run(folder, 0, 1, 2, 3)
    with migrated_sessions.begin() as session:
        assert _outcome(_import(session, folder)) == (2, True, 0)
        assert _outcome(_import(session, folder)) == (2, False, 0)
        assert _counts(session) == (2, 8, 4, 4)


def _exported(session, sweep_id: int, folder: Path) -> exports.Export:
    done = exports.export(session=session, sweep=session.get_one(Sweep, sweep_id))
    write_runs(done.spec, folder, done.ran, done.cut_logs, done.layout, done.folder_id)
    return done


def test_an_exported_folder_keeps_its_identity_here_and_elsewhere(migrated_sessions, tmp_path: Path) -> None:
    folder = _expand(tmp_path)
    with migrated_sessions.begin() as session:
        _import(session, folder)
        assert _exported(session, 1, tmp_path / "exported").folder_id == _folder_id(folder)
    exported = tmp_path / "exported"
    assert read_folder(exported).folder_id == _folder_id(folder)
    # Imported into another database before its cells ran, then run there and imported again: one sweep there.
    elsewhere = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    db.upgrade(elsewhere)
    engine = db.make_engine(elsewhere)
    try:
        with db.make_sessionmaker(engine).begin() as session:
            assert _outcome(_import(session, exported)) == (1, True, 0)
        _run(exported, 0, 1, 2, 3)
        with db.make_sessionmaker(engine).begin() as session:
            there = _import(session, exported)
            assert (_outcome(there), _counts(session)) == ((1, False, 4), (1, 4, 4, 4))
            assert there.sweep.folder_id == _folder_id(folder)
    finally:
        engine.dispose()
    # Brought back, the folder run elsewhere is still this database's sweep's folder.
    with migrated_sessions.begin() as session:
        home = _import(session, exported)
        assert (_outcome(home), _counts(session)) == ((1, False, 4), (1, 4, 4, 4))


def test_a_sweep_without_an_identity_exports_a_folder_with_a_new_one(migrated_sessions, tmp_path: Path) -> None:
    """A sweep submitted here or imported from an older folder has none: its folder gets one of its own, so that it,
    imported elsewhere before its cells ran, is one sweep there; here its runs name the sweep, as before."""
    folder = _expand(tmp_path)
    (folder / FOLDER_FILE).unlink()
    _run(folder, 0)
    with migrated_sessions.begin() as session:
        _import(session, folder)
        assert _exported(session, 1, tmp_path / "a").folder_id is None
        _exported(session, 1, tmp_path / "b")
    assert read_folder(tmp_path / "a").folder_id != read_folder(tmp_path / "b").folder_id
    _run(tmp_path / "a", 1)
    with migrated_sessions.begin() as session:
        again = _import(session, tmp_path / "a")
        assert (_outcome(again), _counts(session)) == ((1, False, 1), (1, 4, 2, 2))
        assert again.sweep.folder_id is None


# ``draftbench expand``, ``import`` and ``export`` themselves.


def _cli_import(folder: Path, url: str) -> str:
    done = run("import", str(folder), "--database-url", url)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_commands_import_a_folder_before_and_after_its_cells_ran_as_one_sweep(db_url: str, tmp_path: Path) -> None:
    sweep_file = tmp_path / "sweep.json"
    sweep_file.write_text(_four_cells().model_dump_json())
    folder = tmp_path / "run"
    expanded = run("expand", str(sweep_file), str(folder))
    assert expanded.returncode == 0, expanded.stderr
    assert _cli_import(folder, db_url) == f"imported sweep 1 '{NAME}': 0 of 4 jobs ran\n"
    _run(folder, 0, 1, 2, 3)
    assert _cli_import(folder, db_url) == f"added 4 runs to sweep 1 '{NAME}': 4 of 4 jobs ran\n"
    assert _cli_import(folder, db_url) == f"already imported as sweep 1 '{NAME}': nothing added\n"
    exported = run("export", "1", str(tmp_path / "exported"), "--database-url", db_url)
    assert exported.returncode == 0, exported.stderr
    assert _folder_id(tmp_path / "exported") == _folder_id(folder)
    _rename(folder)
    line = one_line(run("import", str(folder), "--database-url", db_url))
    assert line.startswith(f"draftbench: nothing imported: {folder}: it is the folder imported as sweep 1 '{NAME}' "), line


@pytest.mark.parametrize(("content", "field"), [
    (b'{"folder_id": 12345}', "folder_id: Input should be a valid string"),
    (b'{"folder_id": "' + b"a" * 100_000 + b'"}', "folder_id: String should have at most 32 characters"),
    (b'{"folder_id": "0123456789abcdefghijklmnopqrstuv"}', "folder_id: String should match pattern"),
], ids=["a number", "100,000 characters", "not hex"])
def test_a_hostile_folder_json_is_one_line_naming_it_and_nothing_is_imported(sqlite_url: str, tmp_path: Path,
                                                                              content: bytes, field: str) -> None:
    folder = _expand(tmp_path)
    _run(folder, 0)
    (folder / FOLDER_FILE).write_bytes(content)
    line = one_line(run("import", str(folder), "--database-url", sqlite_url))
    assert line.startswith(f"draftbench: nothing imported: {folder / FOLDER_FILE}: {field}"), line
    assert len(line) < 400
    db.upgrade(sqlite_url)
    engine = db.make_engine(sqlite_url)
    try:
        with engine.connect() as conn:
            assert conn.scalar(select(func.count()).select_from(Sweep)) == 0
    finally:
        engine.dispose()
