"""Run one command in its own process group with a timeout, capturing its output to a file.

Standard library only: the offline matrix runner uses it on machines that have nothing but vLLM.
A cell that hangs, segfaults or loses its CUDA context takes only its own process group down, and the
group dies with the process that runs it, however that one ends (``runners/lifeline.py``).
"""

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from runners.lifeline import Lifeline

# Where cells keep Python's bytecode (``bytecode_env``), shared by the worker and runners/offline.py.
DEFAULT_PYCACHE = Path.home() / ".cache" / "draftbench" / "pycache"


@dataclass(frozen=True)
class Finished:
    exit_code: int | None
    signal: int | None
    timed_out: bool
    stopped: bool
    duration_s: float


def run(
    argv: Sequence[str],
    *,
    log_path: Path,
    timeout_s: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    on_line: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    poll_s: float = 0.5,
) -> Finished:
    """Run ``argv`` to the end, the timeout, or until ``should_stop()`` says so.

    stdout and stderr go, merged, to ``log_path`` and line by line to ``on_line``. On timeout or
    stop the whole process group gets SIGTERM, then SIGKILL after 10 s, so vLLM's engine-core
    children die with it. Whatever the command started is killed when it ends, and when this
    process dies before it (``Lifeline``).
    """
    start = time.monotonic()
    lifeline = Lifeline.start()
    try:
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=lifeline.env(env),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=lifeline.stdin,
                process_group=lifeline.pgid,
            )
            pump = threading.Thread(target=_pump, args=(proc, log, on_line), daemon=True)
            pump.start()
            timed_out = stopped = False
            while proc.poll() is None:
                if time.monotonic() - start > timeout_s:
                    timed_out = True
                elif should_stop is not None and should_stop():
                    stopped = True
                if timed_out or stopped:
                    _terminate_group(proc, lifeline)
                    break
                time.sleep(poll_s)
            proc.wait()
            # The leader is gone; engine-core children it spawned may not be, and they hold the pipe.
            lifeline.cut()
            pump.join(timeout=10)
    finally:
        lifeline.cut()
    code = proc.returncode
    # A group killed by us reports the signal; keep the timeout/stop as the reason instead.
    return Finished(
        exit_code=code if code is not None and code >= 0 else None,
        signal=-code if code is not None and code < 0 else None,
        timed_out=timed_out,
        stopped=stopped,
        duration_s=time.monotonic() - start,
    )


def _pump(proc: subprocess.Popen, log, on_line: Callable[[str], None] | None) -> None:
    assert proc.stdout is not None
    for raw in iter(proc.stdout.readline, b""):
        log.write(raw)
        log.flush()
        if on_line is not None:
            on_line(raw.decode(errors="replace"))


def _terminate_group(proc: subprocess.Popen, lifeline: Lifeline, grace_s: float = 10.0) -> None:
    lifeline.signal_group(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        lifeline.signal_group(signal.SIGKILL)


def bytecode_env(env: dict[str, str], cache: Path) -> dict[str, str]:
    """``env`` with Python's bytecode read from and written to ``cache`` (``PYTHONPYCACHEPREFIX``), writing allowed.

    Why: where a build's folders hold no bytecode and Python may not write it (pip ``--no-compile``, as the
    H200 recipe installs vLLM; a read-only folder; ``PYTHONDONTWRITEBYTECODE``, set on the machine this
    project is developed on), every cell compiles vLLM's sources again before its engine starts. The cache
    mirrors each source's path, so builds do not mix, and the first process of a build on a host fills it.
    """
    kept = {name: value for name, value in env.items() if name != "PYTHONDONTWRITEBYTECODE"}
    return kept | {"PYTHONPYCACHEPREFIX": str(cache)}


def cell_env(vllm_env: dict[str, str], pycache: Path | None) -> dict[str, str]:
    """A cell's environment, for the worker and runners/offline.py: this process's, the cell's vLLM variables,
    unbuffered output and, unless ``pycache`` is None, the bytecode cache (``bytecode_env``)."""
    env = os.environ | vllm_env | {"PYTHONUNBUFFERED": "1"}
    return env if pycache is None else bytecode_env(env, pycache)
