"""Importing a folder that ran elsewhere: real H200 results (vLLM 0.26.0), once, with the times they ran.

``tests/data/h200-matrix`` is the folder `runners/offline.py` filled on the lent H200 on 2026-11-30
(3 backends x 3 graph modes x draft_model/dflash, random 8-layer Qwen3, load_format=dummy).
"""

import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app import db
from app.cells import service as cells
from app.cells.scope import CellScope
from app.crashes import service as crashes
from app.jobs import queue
from app.models import AlarmCheck, CrashSignature, Job, JobLog, Result, Sweep, Worker, utcnow
from app.sweeps import exports
from app.sweeps import service as sweeps
from app.sweeps.imports import Imported, RunsStored, import_sweep
from runners.folders import read_folder, write_runs
from tests.dashboards.h200 import SWEEPS

H200 = Path(__file__).resolve().parents[1] / "data" / "h200-matrix"


def _imported(session, folder: Path) -> Imported:
    found = read_folder(folder)
    return import_sweep(session=session, spec=found.spec, ran=found.ran, digest=found.digest, layout=found.layout)


def _import(session, folder: Path) -> tuple[Sweep, bool]:
    """The sweep that holds the folder's runs, and whether this import made it."""
    imported = _imported(session, folder)
    return imported.sweep, imported.created


def test_h200_results_import_with_what_ran(migrated_sessions) -> None:
    with migrated_sessions.begin() as session:
        sweep, created = _import(session, H200)
        jobs = {(j.backend, j.graph_mode, j.method): j for j in sweep.jobs}
        assert created and "imported" in sweep.tags and len(jobs) == 18
        assert {j.state.value for j in jobs.values()} == {"succeeded"}
        for (backend, mode, method), job in jobs.items():
            result = job.result
            assert result.vllm_version == "0.26.0" and result.gpu_name == "NVIDIA H200"
            assert result.tokens_per_s > 0 and result.output_tokens == 32 * 128
            # FlashInfer cannot replay full graphs with spec decode: vLLM fell back to PIECEWISE.
            downgraded = backend == "FLASHINFER" and mode != "NONE"
            assert result.graph_downgraded is downgraded, (backend, mode, method)
            assert result.resolved_graph_mode == ("PIECEWISE" if downgraded else mode)
            if method == "draft_model":
                assert result.acceptance_rate >= 0.99 and result.mean_acceptance_length > 3.9
            else:
                # A random DFlash draft guesses nothing right; its graphs are captured only beside a full-graph target.
                assert result.acceptance_rate == 0.0
                assert result.draft_eager is downgraded
                assert result.resolved_draft_graph_mode == ("NONE" if downgraded or mode == "NONE" else "FULL")


def test_importing_the_same_folder_twice_makes_one_sweep(migrated_sessions) -> None:
    with migrated_sessions.begin() as session:
        first, created = _import(session, H200)
    with migrated_sessions.begin() as session:
        again, created_again = _import(session, H200)
        assert created and not created_again and again.id == first.id
        assert session.scalar(select(func.count()).select_from(Sweep)) == 1


def test_imported_results_and_crashes_carry_the_time_they_ran(migrated_sessions, tmp_path: Path) -> None:
    folder = tmp_path / "crashed"
    shutil.copytree(H200, folder)
    crashed = folder / "cells" / "c0005-r0"
    (crashed / "result.json").unlink()
    exit_info = json.loads((crashed / "exit.json").read_text()) | {"exit_code": 1}
    (crashed / "exit.json").write_text(json.dumps(exit_info))
    with migrated_sessions.begin() as session:
        sweep, _ = _import(session, folder)
        jobs = {j.cell_index: j for j in sweep.jobs}
        ran = json.loads((folder / "cells" / "c0000-r0" / "exit.json").read_text())["finished_at"]
        assert jobs[0].result.created_at.strftime("%Y-%m-%dT%H:%M:%SZ") == ran
        assert jobs[0].finished_at == jobs[0].result.created_at
        assert jobs[5].state.value == "crashed" and jobs[5].crash is not None
        seen = jobs[5].crash.created_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert seen == exit_info["finished_at"]
        group = session.scalars(select(CrashSignature)).one()
        assert group.first_seen == group.last_seen == jobs[5].crash.created_at
        assert sweep.created_at == min(j.started_at for j in sweep.jobs if j.started_at)


def test_a_cell_that_never_ran_stays_queued(migrated_sessions, tmp_path: Path) -> None:
    folder = tmp_path / "partial"
    shutil.copytree(H200, folder)
    (folder / "cells" / "c0017-r0" / "exit.json").unlink()
    with migrated_sessions.begin() as session:
        sweep, _ = _import(session, folder)
        states = [j.state.value for j in sweep.jobs]
    assert states.count("succeeded") == 17 and states.count("queued") == 1


def test_an_imported_sweep_is_finished_with_the_cells_it_never_ran_left_queued(migrated_sessions) -> None:
    # The proof's matrix: the lease ended before its last 3 cells. It read "running" forever: nothing runs it.
    with migrated_sessions.begin() as session:
        sweep, _ = _import(session, SWEEPS / "proof" / "h200-matrix")
        summary = sweeps.summary(session=session, sweep=sweep)
        assert summary.counts == {"queued": 3, "succeeded": 21} and summary.state == "finished"
        ran = [j for j in sweep.jobs if j.state.value == "succeeded"]
        assert all(j.finished_at is not None and j.finished_at >= j.started_at for j in ran)
        # Nothing here runs them: a worker for that GPU kind and build claims none, and the page says why they wait.
        worker = Worker(name="w", host="h", gpu_kinds=["H200"], builds=[sweep.build], last_heartbeat_at=utcnow())
        session.add(worker)
        session.flush()
        assert queue.claim(session=session, worker_id=worker.id, gpu_kinds=["H200"], builds=[sweep.build],
                           lease_seconds=120) is None
        assert sweeps.warnings(session=session, sweep_id=sweep.id, lease_seconds=120) == [
            "3 job(s) never ran where this sweep ran: they stay queued to be seen, and no worker here runs them"]


def test_exit_zero_without_a_result_is_a_failure_not_a_crash(migrated_sessions, tmp_path: Path) -> None:
    # A result.json that is there but malformed is refused instead, naming it (tests/sweeps/test_import_refusals.py).
    folder = tmp_path / "broken"
    shutil.copytree(H200, folder)
    (folder / "cells" / "c0000-r0" / "result.json").unlink()
    with migrated_sessions.begin() as session:
        job = next(j for j in _import(session, folder)[0].jobs if j.cell_index == 0)
        assert job.state.value == "failed" and job.error == "the cell exited 0 but wrote no result JSON"


def test_a_lone_surrogate_in_a_result_file_is_stored_as_the_api_stores_it(migrated_sessions, tmp_path: Path) -> None:
    """Pydantic's JSON parser refuses a lone surrogate escape outright; a worker's report over the API keeps the rest
    of its text with U+FFFD instead, and so does an import."""
    folder = tmp_path / "surrogate"
    shutil.copytree(H200, folder)
    result = folder / "cells" / "c0000-r0" / "result.json"
    result.write_text(result.read_text().replace('"gpu_name": "NVIDIA H200"', '"gpu_name": "NVIDIA \\udc80H200"', 1))
    assert "\\udc80" in result.read_text()
    with migrated_sessions.begin() as session:
        sweep, _ = _import(session, folder)
        names = {j.result.gpu_name for j in sweep.jobs if j.result is not None}
        states = {j.state.value for j in sweep.jobs}
    assert (names, states) == ({"NVIDIA H200", "NVIDIA \ufffdH200"}, {"succeeded"})


# The same runs are stored once, whatever bytes their files hold now.

CELL = "cells/c0003-r0"
FINISHED_AT = "%Y-%m-%dT%H:%M:%SZ"


def _copy(tmp_path: Path, name: str = "run") -> Path:
    folder = tmp_path / name
    shutil.copytree(H200, folder)
    return folder


def _counts(session) -> tuple[int, int, int, int]:
    """Sweeps, jobs, results and logs stored."""
    return tuple(session.scalar(select(func.count()).select_from(model)) for model in (Sweep, Job, Result, JobLog))


def _edit_log(folder: Path) -> None:
    with (folder / CELL / "cell.log").open("a") as log:
        log.write("a line added after the run\n")


def _edit_result(folder: Path) -> None:
    path = folder / CELL / "result.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"tokens_per_s": 6100.0}, indent=2))


def _edit_exit(folder: Path) -> None:
    path = folder / CELL / "exit.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"exit_code": 1}))


def _rename(folder: Path) -> None:
    path = folder / "sweep.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"name": "renamed-after-the-run"}))


def _rerun(folder: Path) -> None:
    """The cell's exit.json deleted and the cell run again (``--only-missing``): another run in its place."""
    path = folder / CELL / "exit.json"
    record = json.loads(path.read_text())
    later = datetime.strptime(record["finished_at"], FINISHED_AT).replace(tzinfo=UTC) + timedelta(hours=5)
    path.write_text(json.dumps(record | {"finished_at": later.strftime(FINISHED_AT), "duration_s": 80.5}))


@pytest.mark.parametrize(("edit", "named"), [
    (_edit_log, [f"{CELL}/cell.log"]),
    (_edit_result, [f"{CELL}/result.json"]),
    (_edit_exit, [f"{CELL}/exit.json", f"{CELL}/result.json"]),  # a crash now: its result is not read
    (_rename, ["sweep.json"]),
    (_rerun, [f"{CELL}/exit.json (another run than sweep 1's)"]),
], ids=["a log line", "a result value", "an exit code", "the sweep's name", "one cell run again"])
def test_the_same_runs_with_one_file_changed_are_refused_naming_the_sweep_and_the_file(
        migrated_sessions, tmp_path: Path, edit: Callable[[Path], None], named: list[str]) -> None:
    folder = _copy(tmp_path)
    with migrated_sessions.begin() as session:
        first, created = _import(session, folder)
        assert created and first.id == 1
    edit(folder)
    with migrated_sessions.begin() as session:
        before = _counts(session)
        with pytest.raises(RunsStored) as refused:
            _import(session, folder)
        assert _counts(session) == before == (1, 18, 18, 18)
    message = str(refused.value)
    ran = 17 if edit is _rerun else 18
    assert message.startswith(f"{ran} of its 18 runs are stored already, as sweep 1 'h200-backends-x-graph-modes', and it "
                              f"differs from that sweep in {', '.join(named)}: "), message
    assert "never replaced" in message and refused.value.differences == named
    with migrated_sessions.begin() as session:
        stored = session.scalars(select(Job).where(Job.cell_index == 3)).one()
        assert stored.state.value == "succeeded" and stored.result.tokens_per_s != 6100.0


def test_another_run_of_the_same_spec_is_a_sweep_of_its_own(migrated_sessions, tmp_path: Path) -> None:
    """The same sweep.json run again (on another day, or on a second host at once): other runs, however alike."""
    again = _copy(tmp_path, "again")
    for exit_file in sorted((again / "cells").glob("*/exit.json")):
        record = json.loads(exit_file.read_text())
        later = datetime.strptime(record["finished_at"], FINISHED_AT).replace(tzinfo=UTC) + timedelta(days=1)
        exit_file.write_text(json.dumps(record | {"finished_at": later.strftime(FINISHED_AT)}))
    with migrated_sessions.begin() as session:
        first, _ = _import(session, H200)
        second, created = _import(session, again)
        assert created and second.id != first.id and _counts(session) == (2, 36, 36, 36)
    # A run that ended in the same second but lasted otherwise is another run too (two hosts started at once).
    same_second = _copy(tmp_path, "same-second")
    for exit_file in sorted((same_second / "cells").glob("*/exit.json")):
        record = json.loads(exit_file.read_text())
        exit_file.write_text(json.dumps(record | {"duration_s": record["duration_s"] + 0.25}))
    with migrated_sessions.begin() as session:
        _, created = _import(session, same_second)
        assert created and _counts(session) == (3, 54, 54, 54)


def test_the_same_runs_in_other_bytes_are_imported_before(migrated_sessions, tmp_path: Path) -> None:
    """Files rewritten with the same content (JSON indented otherwise, copied without their times) hold the same
    runs: the first sweep is reported and nothing is added, as for the identical folder."""
    folder = _copy(tmp_path)
    with migrated_sessions.begin() as session:
        first, _ = _import(session, folder)
    for result in sorted((folder / "cells").glob("*/result.json")):
        result.write_text(json.dumps(json.loads(result.read_text())))
    with migrated_sessions.begin() as session:
        again, created = _import(session, folder)
        assert (again.id, created, _counts(session)) == (first.id, False, (1, 18, 18, 18))


def test_a_sweep_exported_and_imported_into_its_own_database_adds_nothing(migrated_sessions, tmp_path: Path) -> None:
    with migrated_sessions.begin() as session:
        first, _ = _import(session, H200)
        done = exports.export(session=session, sweep=first)
    write_runs(done.spec, tmp_path / "exported", done.ran, done.cut_logs, done.layout)
    assert read_folder(tmp_path / "exported").digest != read_folder(H200).digest
    with migrated_sessions.begin() as session:
        again, created = _import(session, tmp_path / "exported")
        assert (again.id, created, _counts(session)) == (first.id, False, (1, 18, 18, 18))


# A folder run further after its import (``runners/offline.py --only-missing``): its sweep gains the runs it lacked.


def _four_cells(tmp_path: Path, name: str = "four") -> Path:
    """The H200 folder cut to FLASH_ATTN x (NONE, FULL_DECODE_ONLY) x (draft_model, dflash): its first 4 cells, each
    an eager cell (c0000, c0001) and its graphed sibling (c0002, c0003)."""
    folder = _copy(tmp_path, name)
    path = folder / "sweep.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"attention_backends": ["FLASH_ATTN"],
                                                               "cudagraph_modes": ["NONE", "FULL_DECODE_ONLY"]}))
    for cell in range(4, 18):
        shutil.rmtree(folder / "cells" / f"c{cell:04d}-r0")
    return folder


def _not_run_yet(folder: Path, *cells: int) -> dict[Path, bytes]:
    """Each cell's ``exit.json`` taken out, as if the run had not reached it; put back, it has run since."""
    taken = {folder / "cells" / f"c{cell:04d}-r0" / "exit.json": b"" for cell in cells}
    for path in taken:
        taken[path] = path.read_bytes()
        path.unlink()
    return taken


def _run_since(taken: dict[Path, bytes]) -> None:
    for path, data in taken.items():
        path.write_bytes(data)


def _as_stored(session, sweep_id: int) -> tuple:
    """What an import stored of a sweep: its state and start, and each job's attempts, times, result and log; the
    graph-capture checks of its build."""
    sweep = session.get(Sweep, sweep_id)
    jobs = [(job.cell_index, job.repeat, job.state.value, job.attempts, job.max_attempts, job.started_at, job.finished_at,
             job.result and (job.result.source, job.result.created_at, job.result.tokens_per_s, job.result.resolved_graph_mode),
             crashes.read_log(session=session, job_id=job.id))
            for job in sweep.jobs]
    checks = session.execute(select(AlarmCheck.backend, AlarmCheck.graph_mode, AlarmCheck.method, AlarmCheck.outcome,
                                    AlarmCheck.sweep_ids, AlarmCheck.ran_at)
                             .order_by(AlarmCheck.graph_mode, AlarmCheck.method)).all()
    return sweeps.summary(session=session, sweep=sweep).state, sweep.created_at, jobs, checks


def test_a_folder_run_further_after_its_import_adds_the_runs_its_sweep_never_ran(migrated_sessions, tmp_path: Path) -> None:
    """A budget cut the run after 2 of its 4 cells; it was imported, then the other 2 ran (``--only-missing``; one of
    them crashed) in the same folder, imported again: the one sweep holds all 4, stored as one import of the whole
    folder stores them."""
    folder = _four_cells(tmp_path)
    taken = _not_run_yet(folder, 2, 3)
    with migrated_sessions.begin() as session:
        first, created = _import(session, folder)
        assert (first.id, created, _counts(session)) == (1, True, (1, 4, 2, 2))
        assert [(j.state.value, j.max_attempts) for j in first.jobs] == [("succeeded", 1)] * 2 + [("queued", 0)] * 2
        assert session.scalar(select(func.count()).select_from(AlarmCheck)) == 0  # no graphed cell ran yet
    _run_since(taken)
    crashed = folder / "cells" / "c0003-r0"
    (crashed / "result.json").unlink()
    (crashed / "exit.json").write_text(json.dumps(json.loads((crashed / "exit.json").read_text()) | {"exit_code": 1}))
    with migrated_sessions.begin() as session:
        again = _imported(session, folder)
        assert (again.sweep.id, again.created, again.added, _counts(session)) == (1, False, 2, (1, 4, 3, 4))
        stored = _as_stored(session, 1)
        pooled = cells.load(session=session, scope=CellScope(build=again.sweep.build))
        assert sorted((c.graph_mode, c.method, c.ran, c.died, c.sweep_ids) for c in pooled) == [
            ("FULL_DECODE_ONLY", "dflash", 0, 1, [1]), ("FULL_DECODE_ONLY", "draft_model", 1, 0, [1]),
            ("NONE", "dflash", 1, 0, [1]), ("NONE", "draft_model", 1, 0, [1])]
        assert session.scalar(select(func.count()).select_from(CrashSignature)) == 1
    assert stored[0] == "finished" and [job[2] for job in stored[2]] == ["succeeded"] * 3 + ["crashed"]
    assert [job[3:5] for job in stored[2]] == [(1, 1)] * 4 and stored[3]  # the graphed cell that ran was judged
    # A third import of the finished folder adds nothing.
    with migrated_sessions.begin() as session:
        third = _imported(session, folder)
        assert (third.sweep.id, third.created, third.added, _counts(session)) == (1, False, 0, (1, 4, 3, 4))
        assert _as_stored(session, 1) == stored
    # The whole folder imported at once into a database of its own stores the same.
    whole = f"sqlite:///{tmp_path / 'whole.db'}"
    db.upgrade(whole)
    engine = db.make_engine(whole)
    try:
        with db.make_sessionmaker(engine).begin() as session:
            at_once, created = _import(session, folder)
            assert created and _as_stored(session, at_once.id)[:3] == stored[:3]
            assert [check[:5] for check in _as_stored(session, at_once.id)[3]] == [check[:5] for check in stored[3]]
    finally:
        engine.dispose()


def test_new_runs_beside_a_stored_run_edited_are_refused_and_none_is_added(migrated_sessions, tmp_path: Path) -> None:
    folder = _four_cells(tmp_path)
    taken = _not_run_yet(folder, 2, 3)
    with migrated_sessions.begin() as session:
        _import(session, folder)
    _run_since(taken)
    with (folder / "cells" / "c0000-r0" / "cell.log").open("a") as log:
        log.write("a line added after the run\n")
    with migrated_sessions.begin() as session:
        with pytest.raises(RunsStored) as refused:
            _import(session, folder)
        assert _counts(session) == (1, 4, 2, 2)
        assert [(j.state.value, j.attempts, j.max_attempts) for j in session.get(Sweep, 1).jobs][2:] == [("queued", 0, 0)] * 2
    assert refused.value.differences == ["cells/c0000-r0/cell.log", "cells/c0002-r0 (not run in sweep 1)",
                                         "cells/c0003-r0 (not run in sweep 1)"]
    assert str(refused.value).startswith("2 of its 4 runs are stored already, as sweep 1 ")


def test_runs_of_jobs_queued_for_this_services_workers_are_refused(migrated_sessions, tmp_path: Path) -> None:
    """A job a worker of this service may still claim is that worker's to run: a run from elsewhere is not stored in
    it, and the refusal says how the job stands."""
    folder = _four_cells(tmp_path)
    taken = _not_run_yet(folder, 2, 3)
    with migrated_sessions.begin() as session:
        sweep, _ = _import(session, folder)
        for job in sweep.jobs[2:]:
            job.max_attempts = 3  # queued as a submitted sweep's jobs are
    _run_since(taken)
    with migrated_sessions.begin() as session:
        with pytest.raises(RunsStored) as refused:
            _import(session, folder)
        assert _counts(session) == (1, 4, 2, 2)
    assert refused.value.differences == ["cells/c0002-r0 (queued in sweep 1)", "cells/c0003-r0 (queued in sweep 1)"]


def test_a_run_another_sweep_holds_is_not_added_to_a_sweep_that_never_ran_it(migrated_sessions, tmp_path: Path) -> None:
    """Two parts of one folder imported apart make two sweeps; the whole folder then would give each sweep's runs to
    the other: refused, each run stays stored once."""
    folder = _four_cells(tmp_path)
    taken = _not_run_yet(folder, 0, 1)
    with migrated_sessions.begin() as session:
        _, created = _import(session, folder)
        assert created  # sweep 1: cells 2 and 3
    _run_since(taken)
    first_half = _four_cells(tmp_path, "first-half")
    _not_run_yet(first_half, 2, 3)
    with migrated_sessions.begin() as session:
        _, created = _import(session, first_half)
        assert created  # sweep 2: cells 0 and 1
    with migrated_sessions.begin() as session:
        with pytest.raises(RunsStored, match=r"^2 of its 4 runs are stored already, as sweep 1 .*\(some also in sweep 2\)"):
            _import(session, folder)
        assert _counts(session) == (2, 8, 4, 4)


def test_a_part_of_runs_stored_already_adds_nothing(migrated_sessions, tmp_path: Path) -> None:
    part = _copy(tmp_path)
    (part / "cells" / "c0017-r0" / "exit.json").unlink()
    with migrated_sessions.begin() as session:
        first, _ = _import(session, H200)
        again, created = _import(session, part)
        assert (again.id, created, _counts(session)) == (first.id, False, (1, 18, 18, 18))
