"""``draftbench export``: a sweep of the database written as the folder ``draftbench import`` reads, and imported
back into an empty database with the same jobs, results, crashes and logs.

The H200 sweeps are the real runs of tests/data/h200-proof-2026-11-30 (vLLM 0.26.0, 2026-11-30); the crashes are
reported through the worker's own API with real crash logs of tests/data/crashlogs.
"""

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app import db
from app.config import Settings
from app.crashes import service as crashes
from app.crashes.rederive import rederive
from app.enums import JobState
from app.models import Crash, Job, Result, Sweep
from app.schemas.cell import CellResult, Serving
from app.sweeps import exports, pairing
from app.sweeps.imports import import_sweep
from runners.folders import read_folder, write_runs
from tests.conftest import AUTH, DATASET
from tests.dashboards.h200 import copy_of
from tests.factories import cell_result, claim, complete, energy_result, register_worker, submit, sweep_body, upload_log

ROOT = Path(__file__).resolve().parents[2]
CRASHLOGS = ROOT / "tests" / "data" / "crashlogs"
SECOND = "%Y-%m-%dT%H:%M:%S"


def _export(url: str, ref: str, folder: Path) -> exports.Export:
    db.upgrade(url)
    engine = db.make_engine(url)
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            done = exports.export(session=session, sweep=exports.find(session=session, ref=ref))
    finally:
        engine.dispose()
    write_runs(done.spec, folder, done.ran, done.cut_logs, done.layout)
    return done


def _round_trip(source_url: str, ref: str, tmp_path: Path, *, into: str = "imported.db") -> int:
    """Export ``ref`` from ``source_url``, import the folder into a SQLite database (``into``, under ``tmp_path``),
    compare every job, and return the imported sweep's id."""
    folder = tmp_path / f"exported-{ref}"
    _export(source_url, ref, folder)
    target_url = f"sqlite:///{tmp_path / into}"
    db.upgrade(target_url)
    found = read_folder(folder)
    source, target = db.make_engine(source_url), db.make_engine(target_url)
    try:
        with Session(target) as into_session, Session(source) as original:
            stored = import_sweep(session=into_session, spec=found.spec, ran=found.ran, digest=found.digest,
                                  layout=found.layout)
            imported, created = stored.sweep, stored.created
            into_session.flush()
            sweep = exports.find(session=original, ref=ref)
            # A spec's paired_with named a sweep of the database it came from: the jobs' pairs stand for it.
            unpaired = {key: value for key, value in sweep.spec.items() if key != "paired_with"}
            assert created and (imported.name, imported.build, imported.spec) == (sweep.name, sweep.build, unpaired)
            assert imported.tags == [*sweep.tags, "imported"]
            pairs = _pairs(sweep.jobs, imported.jobs)
            for job, again in pairs:
                _same_job(original, job, into_session, again, folder)
            assert len(pairs) == len(sweep.jobs) == len(imported.jobs)
            into_session.commit()
            return imported.id
    finally:
        source.dispose()
        target.dispose()


def _pairs(jobs: list[Job], again: list[Job]) -> list[tuple[Job, Job]]:
    by_cell = {(job.cell_index, job.repeat): job for job in again}
    return [(job, by_cell[(job.cell_index, job.repeat)]) for job in jobs]


def _same_job(original: Session, job: Job, into: Session, again: Job, folder: Path) -> None:
    where = (job.id, job.cell_index, job.repeat, job.state)
    assert (again.spec, again.config_hash) == (job.spec, job.config_hash), where
    assert (again.pair_id, again.pair_order) == (job.pair_id, job.pair_order), where
    log = crashes.read_log(session=original, job_id=job.id)
    if job.state not in exports.RAN:
        # Never ran to an end (queued, running, failed): queued again, its log kept beside its spec.
        assert again.state is JobState.QUEUED and again.result is None and again.crash is None, where
        cell_log = folder / "cells" / f"c{job.cell_index:04d}-r{job.repeat}" / "cell.log"
        assert (cell_log.read_bytes().decode() if cell_log.exists() else None) == log, where
        return
    assert again.state is job.state and again.error == job.error and again.attempts == 1, where
    assert crashes.read_log(session=into, job_id=again.id) == log, where
    # exit.json holds finished_at to the second.
    assert again.finished_at.strftime(SECOND) == job.finished_at.strftime(SECOND), where
    if job.result is not None:
        assert abs(again.started_at - job.started_at) < timedelta(seconds=1), where
        _same_row(job.result, again.result, Result, skip={"id", "job_id"}, where=where)
    else:
        _same_row(job.crash, again.crash, Crash, skip={"id", "job_id", "signature_id"}, where=where)
        group, group_again = job.crash.signature_group, again.crash.signature_group
        assert (group_again.signature, group_again.title, group_again.kind) == (group.signature, group.title, group.kind)


AS_STORED = {"serving": Serving, "raw": CellResult}


def _same_row(row: object, again: object, model: type, *, skip: set[str], where: object) -> None:
    for column in model.__table__.columns:
        if column.name in skip:
            continue
        value, value_again = getattr(row, column.key), getattr(again, column.key)
        if column.name == "created_at":
            value, value_again = value.strftime(SECOND), value_again.strftime(SECOND)
        elif column.name == "duration_s":
            value = round(value, 3)
        elif column.name in AS_STORED and value is not None:
            # Rows stored before cell schema 5 lack Serving.empty; their import spells its default out.
            schema = AS_STORED[column.name]
            value, value_again = (schema.model_validate(v).model_dump(mode="json") for v in (value, value_again))
        assert value_again == value, (where, column.name)


@pytest.mark.parametrize(("database", "sweep"), [
    ("proof", "h200-matrix"),  # 21 cells ran, 2 cut by the end of the lease (logs kept), 1 queued
    ("batch2", "h200-serving"),  # serving figures (TTFT, TPOT, ITL) and no model runner
    ("batch2", "h200-fallback-repeats"),  # repeats: 1 ran, 2 cut, 9 queued
    ("capture-bug", "h200-matrix"),  # 24 jobs failed before running (no interpreter): queued again
])
def test_an_exported_h200_sweep_imports_back_to_the_same_jobs_results_and_logs(database: str, sweep: str, tmp_path: Path) -> None:
    # These databases were stored before migration 0025: what their logs say of async scheduling is read by rederive, as
    # the migration asks; an import reads it from the log, so the two agree only once the source has been read again.
    url = copy_of(database, tmp_path)
    db.upgrade(url)
    engine = db.make_engine(url)
    with Session(engine) as session:
        assert any(m.field == "async_scheduling_off" for m in rederive(session=session).results)
        session.commit()
    engine.dispose()
    _round_trip(url, sweep, tmp_path)


def test_the_exported_h200_matrix_is_the_folder_offline_py_would_have_left(tmp_path: Path) -> None:
    done = _export(copy_of("proof", tmp_path), "3", tmp_path / "out")
    cells = tmp_path / "out" / "cells"
    assert done.states == {"succeeded": 21, "running": 2, "queued": 1} and len(list(cells.iterdir())) == 24
    assert sorted(p.name for p in (cells / "c0000-r0").iterdir()) == ["cell.log", "exit.json", "result.json", "spec.json"]
    assert json.loads((cells / "c0000-r0" / "exit.json").read_text()) == {
        "exit_code": 0, "signal": None, "timed_out": False, "duration_s": 44.039, "finished_at": "2026-11-30T13:58:49Z"}
    assert sorted(p.name for p in (cells / "c0021-r0").iterdir()) == ["cell.log", "spec.json"]  # cut mid-cell
    assert sorted(p.name for p in (cells / "c0023-r0").iterdir()) == ["spec.json"]  # never started
    # vLLM's progress bars rewrite their line with \r: the log is kept byte for byte.
    assert b"\r" in (cells / "c0002-r0" / "cell.log").read_bytes()


@pytest.fixture
def crashed(client: TestClient, settings: Settings) -> str:
    """A sweep of 4 jobs reported through the worker API: a crash, a timeout and a result, one job left queued."""
    worker = register_worker(client)
    assert submit(client, sweep_body(DATASET, name="crashes")).status_code == 201
    outcomes = [
        ("own-cpu-synthetic-1.log", {"exit_code": 1, "duration_s": 12.25}),
        ("nccl-watchdog-vllm-6042.log", {"signal": 9, "timed_out": True, "duration_s": 900.0}),
        ("own-cpu-synthetic-1.log", {"result": cell_result(), "exit_code": 0}),
    ]
    for name, outcome in outcomes:
        job = claim(client, worker)
        assert upload_log(client, job["job_id"], worker, (CRASHLOGS / name).read_text()).status_code == 204
        assert complete(client, job["job_id"], worker, outcome).status_code == 200
    return settings.database_url


def test_crashed_and_timed_out_cells_import_back_under_the_same_signatures(crashed: str, tmp_path: Path) -> None:
    _round_trip(crashed, "crashes", tmp_path)
    cells = tmp_path / "exported-crashes" / "cells"
    exits = {p.name: json.loads((p / "exit.json").read_text()) for p in cells.iterdir() if (p / "exit.json").exists()}
    assert [(e["exit_code"], e["signal"], e["timed_out"], e["duration_s"]) for _, e in sorted(exits.items())] == [
        (1, None, False, 12.25), (None, 9, True, 900.0), (0, None, False, exits["c0001-r0"]["duration_s"])]


def test_a_paired_pair_with_added_starts_imports_back_paired_with_every_job_each(
        client: TestClient, settings: Settings, tmp_path: Path) -> None:
    worker = register_worker(client, builds=("vllm-test", "vllm-pr"))
    base = submit(client, sweep_body(DATASET, name="base", repeats=1)).json()
    head = submit(client, sweep_body(DATASET, name="head", build="vllm-pr", repeats=1, paired_with=base["id"])).json()
    for _ in range(4):
        job = claim(client, worker)
        assert upload_log(client, job["job_id"], worker, f"job {job['job_id']}\n").status_code == 204
        assert complete(client, job["job_id"], worker, {"result": cell_result(), "exit_code": 0}).status_code == 200
    more = client.post(f"/api/v1/sweeps/{head['id']}/more", json={"cells": [{"cell_index": 1, "pairs": 2}]}, headers=AUTH)
    assert more.status_code == 200, more.text
    for _ in range(2):  # one added pair runs, the other stays queued
        job = claim(client, worker)
        assert upload_log(client, job["job_id"], worker, f"job {job['job_id']}\n").status_code == 204
        assert complete(client, job["job_id"], worker, {"result": cell_result(), "exit_code": 0}).status_code == 200
    ids = {name: _round_trip(settings.database_url, name, tmp_path, into="both.db") for name in ("base", "head")}
    folder = tmp_path / "exported-head"
    assert sorted(p.name for p in (folder / "cells").iterdir()) == ["c0000-r0", "c0001-r0", "c0001-r1", "c0001-r2"]
    assert json.loads((folder / "sweep.json").read_text())["paired_with"] == base["id"]  # as stored; the import drops it
    assert sorted(json.loads((folder / "pairs.json").read_text())) == ["c0000-r0", "c0001-r0", "c0001-r1", "c0001-r2"]
    engine = db.make_engine(f"sqlite:///{tmp_path / 'both.db'}")
    try:
        with Session(engine) as session:
            assert pairing.partner(session=session, sweep_id=ids["head"]) == ids["base"]
    finally:
        engine.dispose()


def test_a_sweep_exported_and_imported_into_its_own_database_is_not_stored_twice(crashed: str, tmp_path: Path) -> None:
    """The folder holds the very runs the workers reported (a crash, a timeout, a result): an import adds none of them,
    and an edited copy is refused naming the sweep and the file."""
    folder = tmp_path / "exported"
    assert _cli("export", "crashes", str(folder), url=crashed).returncode == 0
    again = _cli("import", str(folder), url=crashed)
    assert (again.returncode, again.stdout, again.stderr) == (
        0, "already stored as sweep 1 'crashes' (run by this service's workers): nothing added\n", "")
    crash_log = next(log for log in sorted(folder.glob("cells/*/cell.log")) if not (log.parent / "result.json").exists())
    crash_log.write_text(crash_log.read_text() + "edited\n")
    edited = _cli("import", str(folder), url=crashed)
    name = crash_log.parent.name
    assert edited.returncode == 1 and edited.stderr == (
        f"draftbench: nothing imported: {folder}: 3 of its 3 runs are stored already, as sweep 1 'crashes', and it differs "
        f"from that sweep in cells/{name}/cell.log: a run is stored once, and a stored run is never replaced\n")
    engine = db.make_engine(crashed)
    try:
        with Session(engine) as session:
            assert session.scalar(select(func.count()).select_from(Sweep)) == 1
            assert session.scalar(select(func.count()).select_from(Crash)) == 2
    finally:
        engine.dispose()


def test_a_spec_that_no_longer_expands_to_its_jobs_is_refused(crashed: str, tmp_path: Path) -> None:
    engine = db.make_engine(crashed)
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            sweep = session.scalars(select(Sweep)).one()
            sweep.spec = {**sweep.spec, "graph_modes": ["PIECEWISE"]}  # as if NONE had been renamed since
            with pytest.raises(exports.ExportError, match="no longer expands to its jobs"):
                exports.export(session=session, sweep=sweep)
    finally:
        engine.dispose()


def _cli(*args: str, url: str) -> subprocess.CompletedProcess:
    """``python -m app.cli`` from this checkout, as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRAFTBENCH_")} | {"DRAFTBENCH_DATABASE_URL": url}
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)


def test_the_cli_exports_by_name_and_refuses_an_unknown_sweep_or_a_folder_in_use(tmp_path: Path) -> None:
    url = copy_of("batch2", tmp_path)
    done = _cli("export", "h200-serving", str(tmp_path / "serving"), url=url)
    assert done.returncode == 0, done.stderr
    assert "sweep 3 'h200-serving' written under" in done.stdout and "4 of 4 jobs ran (succeeded 4)" in done.stdout
    unknown = _cli("export", "h200-nothing", str(tmp_path / "x"), url=url)
    assert (unknown.returncode, unknown.stderr) == (2, "draftbench: sweep 'h200-nothing' not found\n")
    assert not (tmp_path / "x").exists()
    again = _cli("export", "3", str(tmp_path / "serving"), url=url)
    assert again.returncode == 2 and again.stderr.startswith("draftbench: ") and "is not empty" in again.stderr
    assert len(again.stderr.splitlines()) == 1


def test_a_name_that_several_sweeps_share_asks_for_an_id(tmp_path: Path) -> None:
    url = copy_of("proof", tmp_path)
    db.upgrade(url)  # the proof's database is at revision 0007: today's models read today's tables
    engine = db.make_engine(url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        session.get_one(Sweep, 7).name = "h200-matrix"
    engine.dispose()
    done = _cli("export", "h200-matrix", str(tmp_path / "out"), url=url)
    assert done.returncode == 2 and "2 sweeps are named 'h200-matrix' (ids 3, 7)" in done.stderr


def test_hostile_sweep_refs_and_folders_get_one_line_each(tmp_path: Path) -> None:
    url = copy_of("batch2", tmp_path)
    (tmp_path / "a-file").write_text("")
    for ref, folder, message in [
        ("9" * 30, tmp_path / "x", f"sweep '{'9' * 30}' not found"),  # beyond SQLite's integers: a name
        ("3", tmp_path / "a-file" / "sub", "Not a directory"),
    ]:
        done = _cli("export", ref, str(folder), url=url)
        assert done.returncode == 2 and done.stderr.startswith("draftbench: ") and message in done.stderr, done.stderr
        assert len(done.stderr.splitlines()) == 1


def test_a_stored_result_an_import_would_refuse_is_named_not_a_traceback(crashed: str, tmp_path: Path) -> None:
    # A database written before the ceilings on reports may hold such a row: its folder would not import.
    engine = db.make_engine(crashed)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        result = session.scalars(select(Result)).one()
        result.raw = {**result.raw, "tokens_per_s": 1e308}
        job_id = result.job_id
    engine.dispose()
    done = _cli("export", "crashes", str(tmp_path / "out"), url=crashed)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"draftbench: job {job_id} (cells/c0001-r0): its stored result is one an import refuses (tokens_per_s: ")


def test_a_results_energy_and_a_reason_for_none_import_back_as_they_were(
        client: TestClient, settings: Settings, tmp_path: Path) -> None:
    worker = register_worker(client)
    submit(client, sweep_body(DATASET, name="energy", repeats=1))
    for result in (energy_result([400.0, 500.0, 250.0]), energy_result([None], reason="not reported (NVML: Not Supported)")):
        job = claim(client, worker)
        assert upload_log(client, job["job_id"], worker, f"job {job['job_id']}\n").status_code == 204
        assert complete(client, job["job_id"], worker, {"result": result, "exit_code": 0}).status_code == 200
    # _round_trip compares every column of every result, the energy's among them.
    imported = _round_trip(settings.database_url, "energy", tmp_path)
    engine = db.make_engine(f"sqlite:///{tmp_path / 'imported.db'}")
    try:
        with Session(engine) as session:
            rows = session.scalars(select(Result).join(Job).where(Job.sweep_id == imported).order_by(Job.cell_index)).all()
            assert [(r.energy_j, r.tokens_per_joule, r.energy_reason) for r in rows] == [
                (1150.0, 2.5, None), (None, None, "not reported (NVML: Not Supported)")]
    finally:
        engine.dispose()


def test_export_writes_through_no_link_and_leaves_nothing_when_it_cannot_finish(tmp_path: Path) -> None:
    url = copy_of("batch2", tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for link, target in (("to-a-folder", elsewhere), ("dangling", tmp_path / "nowhere")):
        (tmp_path / link).symlink_to(target)
        done = _cli("export", "3", str(tmp_path / link), url=url)
        assert done.returncode == 2 and done.stderr == (
            f"draftbench: {tmp_path / link} is a symbolic link: export writes only into a new or empty folder\n")
    assert not any(elsewhere.iterdir()) and not (tmp_path / "nowhere").exists()
    # A folder that cannot be written: nothing is left behind, no half-written folder.
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        done = _cli("export", "3", str(locked / "run"), url=url)
    finally:
        locked.chmod(0o700)
    if os.geteuid() != 0:
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
