"""``draftbench rederive`` on a real database: results and crashes read again from their stored logs."""

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.api.main import create_app
from app.config import Settings
from app.crashes.rederive import rederive
from app.enums import CrashKind
from app.models import Crash, CrashSignature, Result
from tests.cli.test_errors import run
from tests.conftest import AUTH, TOKEN
from tests.crashes.test_api import RANGE, SHAPE, exception_log
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body, upload_log

CPU_LOG = "(EngineCore_DP0 pid=5) INFO 11-30 00:00:00 [cpu_worker.py:260] Auto set (1.08/8.84) GiB for KV cache\n"
LEGACY = "e" * 64  # a group the rules of an older release made


def store(client: TestClient, dataset) -> dict[str, int]:
    """A result and three crashes with their logs, the RANGE group merged into the SHAPE group by hand."""
    worker = register_worker(client)
    submit(client, sweep_body(dataset, repeats=2))
    jobs = {}
    for name, line in (("result", None), ("range_a", RANGE), ("range_b", RANGE), ("shape", SHAPE)):
        job = claim(client, worker)["job_id"]
        log = CPU_LOG if line is None else exception_log(line, job)
        assert upload_log(client, job, worker, log).status_code == 204
        outcome = {"result": cell_result(), "exit_code": 0} if line is None else {"exit_code": 1}
        assert complete(client, job, worker, outcome).status_code == 200
        jobs[name] = job
    titles = {g["title"].split(":")[0]: g["signature"] for g in client.get("/api/v1/crashes").json()}
    merged = client.post(f"/api/v1/crashes/{titles['ValueError']}/merge",
                         json={"into": titles["RuntimeError"], "reason": "one cause"}, headers=AUTH)
    assert merged.status_code == 200
    jobs["group"] = titles["RuntimeError"]
    return jobs


@pytest.fixture
def stored(client: TestClient, dataset) -> dict[str, int]:
    return store(client, dataset)


def _as_an_older_release_left_it(session, stored: dict) -> None:
    """What ran read wrong, and the SHAPE crash in a group of its own titled by its exit code."""
    result = session.scalar(select(Result))
    result.resolved_graph_mode, result.graph_downgraded = "FULL", True
    legacy = CrashSignature(signature=LEGACY, title="exit code 1", kind=CrashKind.EXIT, message="exit code 1",
                            frames=[], count=1)
    crash = session.scalar(select(Crash).where(Crash.job_id == stored["shape"]))
    crash.signature_group, crash.kind = legacy, CrashKind.EXIT
    session.add(legacy)
    session.commit()


def test_rederive_moves_what_the_rules_read_differently_and_keeps_a_merge(stored, migrated_sessions):
    with migrated_sessions() as session:
        _as_an_older_release_left_it(session, stored)
    with migrated_sessions() as session:
        report = rederive(session=session)
        session.commit()
    assert (report.results_read, report.crashes_read) == (1, 3)
    assert {(m.job_id, m.field, m.old, m.new) for m in report.results} == {
        (stored["result"], "resolved_graph_mode", "FULL", "NONE"), (stored["result"], "graph_downgraded", True, False)
    }
    [moved] = report.crashes
    assert (moved.job_id, moved.old, moved.new) == (stored["shape"], LEGACY, stored["group"])
    assert (report.created, report.emptied) == ([], [LEGACY])
    with migrated_sessions() as session:
        [group] = session.scalars(select(CrashSignature))
        # The merge made by hand holds: all three crashes in one group.
        assert (group.signature, group.count, sorted(c.job_id for c in group.crashes)) == (
            stored["group"], 3, sorted([stored["range_a"], stored["range_b"], stored["shape"]])
        )
        assert session.scalar(select(Crash).where(Crash.job_id == stored["shape"])).kind is CrashKind.EXCEPTION
        assert session.scalar(select(Result)).resolved_graph_mode == "NONE"


def test_rederive_twice_moves_nothing_the_second_time(stored, migrated_sessions):
    with migrated_sessions() as session:
        rederive(session=session)
        session.commit()
    with migrated_sessions() as session:
        again = rederive(session=session)
    assert (again.results, again.crashes, again.created, again.emptied) == ([], [], [], [])


@pytest.fixture
def sqlite_client(sqlite_url: str) -> Iterator[TestClient]:
    app = create_app(Settings(database_url=sqlite_url, token=TOKEN))
    with TestClient(app) as client:
        yield client
    app.state.engine.dispose()


def test_the_command_shows_what_moved_and_a_dry_run_writes_nothing(sqlite_client, sqlite_url, dataset):
    jobs = store(sqlite_client, dataset)
    sessions = sqlite_client.app.state.sessionmaker
    with sessions() as session:
        _as_an_older_release_left_it(session, jobs)
    dry = run("rederive", "--database-url", sqlite_url, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "resolved_graph_mode" in dry.stdout and "groups emptied: eeeeeeeeeeee" in dry.stdout
    assert "dry run, nothing written" in dry.stdout
    assert any(g["signature"] == LEGACY for g in sqlite_client.get("/api/v1/crashes").json())
    done = run("rederive", "--database-url", sqlite_url)
    assert done.returncode == 0, done.stderr
    assert "2 result fields and 1 crashes moved" in done.stdout
    assert [g["signature"] for g in sqlite_client.get("/api/v1/crashes").json()] == [jobs["group"]]
