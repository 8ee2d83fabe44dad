"""The service's schedule (app/periodic.py): every job runs each period, and one that fails does not stop the others."""

import threading

import anyio
from sqlalchemy.exc import OperationalError

from app import periodic


def test_a_failing_job_is_logged_and_the_schedule_goes_on(caplog) -> None:
    runs = {"db": 0, "bug": 0, "ok": 0}
    done = threading.Event()

    def database_away() -> None:
        runs["db"] += 1
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    def bug() -> None:
        runs["bug"] += 1
        raise ZeroDivisionError("a bug in a statistic")

    def ok() -> None:
        runs["ok"] += 1
        if runs["ok"] >= 3:
            done.set()

    async def main() -> None:
        async with periodic.running(0.01, ("database", database_away), ("bug", bug), ("ok", ok)):
            with anyio.fail_after(10):
                while not done.is_set():
                    await anyio.sleep(0.01)

    anyio.run(main)
    assert runs["ok"] >= 3 and runs["db"] >= 3 and runs["bug"] >= 3
    assert "database failed" in caplog.text and "bug failed (not the database)" in caplog.text


def test_once_runs_a_job_and_logs_its_failure_without_raising(caplog) -> None:
    ran = []
    anyio.run(periodic.once, "ok", lambda: ran.append(1))

    def away() -> None:
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    anyio.run(periodic.once, "noise model", away)
    assert ran == [1] and "noise model failed" in caplog.text
