"""runners/execute.py: a command's processes live no longer than its run, nor than the process running it.

The cells here are stand-ins: a Python child that starts a grandchild as vLLM starts its EngineCore
(in the child's process group) or as a server that left it (a session of its own), then sleeps. The
caller is a real process running ``execute.run``, as the worker and runners/offline.py do.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from runners import execute, lifeline
from tests import procs

REPO = Path(__file__).resolve().parents[2]
# A SIGKILLed caller's cell and its children must be gone within this (a worker's ran on 35 s, holding its GPU).
GONE_WITHIN_S = 5.0

CELL = textwrap.dedent("""
    import os, subprocess, sys, time
    pids, placement, linger_s, exit_code, marker = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    away = {k: v for k, v in os.environ.items() if k != marker}
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], **{
        "cell's group": {},
        # Left for a session of its own, keeping only its stdin (vLLM's processes rename themselves, which
        # overwrites what /proc shows of their environment) or only its environment.
        "own session, its stdin kept": {"start_new_session": True, "env": away},
        "own session, its environment kept": {"start_new_session": True, "stdin": subprocess.DEVNULL},
    }[placement])
    with open(pids + ".tmp", "w") as handle:
        handle.write(f"{os.getpid()} {engine.pid}")
    os.replace(pids + ".tmp", pids)
    print("engine up", flush=True)
    time.sleep(linger_s)
    sys.exit(exit_code)
""")
CALLER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from runners import execute, lifeline

    def leak(line):
        # A fork of the caller holds its end of the guard's pipe, as any fork of a worker would: then only
        # the parent-death signal tells the guard that the caller died.
        if "engine up" in line and os.fork() == 0:
            Path(sys.argv[1] + ".fork").write_text(str(os.getpid()))
            time.sleep(600)
            os._exit(0)

    log = Path(sys.argv[1])
    execute.run(sys.argv[3:], log_path=log, timeout_s=600, cwd=log.parent, on_line=leak if sys.argv[2] == "leak" else None)
""")
PLACEMENTS = ["cell's group", "own session, its stdin kept", "own session, its environment kept"]


def cell_argv(tmp_path: Path, placement: str, *, linger_s: float = 600, exit_code: int = 0) -> list[str]:
    script = tmp_path / "cell.py"
    script.write_text(CELL)
    return [sys.executable, str(script), str(tmp_path / "pids"), placement, str(linger_s), str(exit_code), lifeline.MARKER]


def started(path: Path, timeout_s: float = 30.0) -> list[int]:
    """The pids in ``path`` (the stand-in cell's and its engine's), once it is written."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} was never written"
        time.sleep(0.05)
    return [int(pid) for pid in path.read_text().split()]


@pytest.mark.parametrize(("placement", "leak"), [*((placement, False) for placement in PLACEMENTS), (PLACEMENTS[0], True)],
                         ids=[*PLACEMENTS, "a fork holds the caller's end of the pipe"])
def test_a_cell_and_its_engine_die_with_a_caller_killed_by_sigkill(tmp_path: Path, placement: str, leak: bool) -> None:
    log = tmp_path / "cell.log"
    caller = subprocess.Popen(
        [sys.executable, "-c", CALLER, str(log), "leak" if leak else "-", *cell_argv(tmp_path, placement)],
        cwd=REPO, start_new_session=True,
    )
    leftovers: dict[int, str] = {}
    try:
        pids = started(tmp_path / "pids")
        leftovers = procs.identities(pids + (started(tmp_path / "cell.log.fork") if leak else []))
        os.kill(caller.pid, signal.SIGKILL)
        caller.wait(timeout=10)
        took = procs.seconds_until_gone(pids, GONE_WITHIN_S)
        survivors = [pid for pid in pids if procs.alive(pid)]
        assert took is not None, f"still running {GONE_WITHIN_S:.0f} s after the caller's SIGKILL: {survivors} of {pids}"
    finally:
        caller.kill()
        procs.kill_all(leftovers)


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize(
    ("ending", "linger_s", "exit_code", "limits", "expected"),
    [
        ("finished", 0, 3, {}, (3, None, False, False)),
        # Long enough for the stand-in to start its engine on two busy cores.
        ("timed out", 600, 0, {"timeout_s": 5.0}, (None, signal.SIGTERM, True, False)),
        ("stopped", 600, 0, {"stop": True}, (None, signal.SIGTERM, False, True)),
    ],
)
def test_a_cell_that_ends_takes_its_engine_and_its_guard_with_it(
    tmp_path: Path, placement: str, ending: str, linger_s: float, exit_code: int, limits: dict, expected: tuple
) -> None:
    before = procs.children(os.getpid())
    stop = limits.get("stop", False)
    leftovers: dict[int, str] = {}
    try:
        finished = execute.run(
            cell_argv(tmp_path, placement, linger_s=linger_s, exit_code=exit_code),
            log_path=tmp_path / "cell.log", timeout_s=limits.get("timeout_s", 600), cwd=tmp_path,
            # Stopped (cancelled) once its engine is up.
            should_stop=lambda: stop and (tmp_path / "pids").exists(), poll_s=0.1,
        )
        pids = started(tmp_path / "pids")
        leftovers = procs.identities(pids)
        assert (finished.exit_code, finished.signal, finished.timed_out, finished.stopped) == expected
        assert "engine up" in (tmp_path / "cell.log").read_text()
        # SIGKILL is sent by the time run() returns; the processes exit as soon as they are scheduled.
        assert procs.seconds_until_gone(pids, GONE_WITHIN_S) is not None, f"{ending}: the cell left its engine running"
        assert procs.children(os.getpid()) == before, f"{ending}: a process the run started is still running"
    finally:
        procs.kill_all(leftovers)
