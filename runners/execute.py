"""Run one command in its own process group with a timeout, capturing its output to a file.

Standard library only: the offline matrix runner uses it on machines that have nothing but vLLM.
A cell that hangs, segfaults or loses its CUDA context takes only its own process group down, and the
group dies with the process that runs it, however that one ends (``runners/lifeline.py``). A cell may be
forked from its build's fork server (``ForkServer``, ``runners/forkserver.py``) instead of started anew:
the same group, log, timeout and stop, without importing vLLM again.
"""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from runners.lifeline import MARKER, Lifeline

# Where cells keep Python's bytecode (``bytecode_env``), shared by the worker and runners/offline.py.
DEFAULT_PYCACHE = Path.home() / ".cache" / "draftbench" / "pycache"
FORK_SERVER_SCRIPT = Path(__file__).with_name("forkserver.py")
# runners/forkserver.py's largest message.
MESSAGE_BYTES = 1 << 20


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
    fork_server: "ForkServer | None" = None,
) -> Finished:
    """Run ``argv`` to the end, the timeout, or until ``should_stop()`` says so.

    stdout and stderr go, merged, to ``log_path`` and line by line to ``on_line``. On timeout or
    stop the whole process group gets SIGTERM, then SIGKILL after 10 s, so vLLM's engine-core
    children die with it. Whatever the command started is killed when it ends, and when this
    process dies before it (``Lifeline``).

    With ``fork_server`` (``argv`` is then ``[its python, runners/cell.py, ...]``) the server forks the command
    into the same group, with the same stdin, log and environment; where the server cannot (it refused, or
    died), the command starts anew as without one.
    """
    start = time.monotonic()
    lifeline = Lifeline.start()
    try:
        with open(log_path, "wb") as log:
            read_end, write_end = os.pipe()
            try:
                proc = _launch(argv, cwd=cwd, env=lifeline.env(env), lifeline=lifeline, log=write_end,
                               fork_server=fork_server, timeout_s=timeout_s)
            except BaseException:
                os.close(read_end)
                raise
            finally:
                # Only the command holds the write end now: the pump reads to the end of its output.
                os.close(write_end)
            pump = threading.Thread(target=_pump, args=(os.fdopen(read_end, "rb"), log, on_line), daemon=True)
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


def _launch(
    argv: Sequence[str], *, cwd: Path | None, env: dict[str, str], lifeline: Lifeline, log: int,
    fork_server: "ForkServer | None", timeout_s: float,
) -> "subprocess.Popen | Forked":
    """The command's process in the lifeline's group, its stdout and stderr on ``log``: forked by ``fork_server``
    where it can, else started anew."""
    if fork_server is not None:
        if argv[0] != fork_server.python:
            raise ValueError(f"the fork server runs {fork_server.python}, not {argv[0]}")
        forked = fork_server.launch(list(argv[1:]), cwd=str(cwd or os.getcwd()), env=env, stdin=lifeline.stdin,
                                    log=log, pgid=lifeline.pgid, timeout_s=timeout_s)
        if forked is not None:
            return forked
    return subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=lifeline.stdin,
                            process_group=lifeline.pgid)


def _pump(output, log, on_line: Callable[[str], None] | None) -> None:
    with output:
        # At most 1 MiB a read: a cell that writes gigabytes without a newline must not fill this process's memory.
        for raw in iter(lambda: output.readline(1 << 20), b""):
            log.write(raw)
            log.flush()
            if on_line is not None:
                on_line(raw.decode(errors="replace"))


def _terminate_group(proc: "subprocess.Popen | Forked", lifeline: Lifeline, grace_s: float = 10.0) -> None:
    lifeline.signal_group(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        lifeline.signal_group(signal.SIGKILL)


# What every cell's vLLM gets unless the host's environment or the sweep says otherwise.
# VLLM_ENABLE_STARTUP_PLAN (vLLM 0.26 and later, off in vLLM by default): an engine keeps the KV cache's size that its
# memory profiling found, per configuration and GPU, under vLLM's cache folder, and a later start of the same
# configuration with as much free memory takes it instead of profiling again (3 to 4 s of an 8B start on an H100,
# between its log's "Initial profiling/warmup run" and "Available KV cache memory"). What the rounds measure is
# unchanged: the same graphs run, with the KV cache the first start's log suggests as --kv-cache-memory (its profile
# and its graphs' actual memory: within a fraction of a percent of what the first start allocated).
START_ENV = {"VLLM_ENABLE_STARTUP_PLAN": "1"}


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
    """A cell's environment, for the worker and runners/offline.py: ``START_ENV`` under this process's, the cell's
    vLLM variables, unbuffered output and, unless ``pycache`` is None, the bytecode cache (``bytecode_env``)."""
    env = START_ENV | os.environ | vllm_env | {"PYTHONUNBUFFERED": "1"}
    return env if pycache is None else bytecode_env(env, pycache)


class ForkServer:
    """A build's fork server (``runners/forkserver.py``) seen from the worker: started at its first cell, in the
    environment it was made for, and asked for one cell at a time.

    It runs under a lifeline of its own, so it dies with the worker as a cell does. A cell's start counts from when
    it asked, or from the server's own start for the cell that started it: that cell's ``import_s`` and wall time
    hold the server's import, so efficiency still adds up to what the host spent. Where the server cannot serve a
    cell, ``launch`` answers None and the cell starts anew: while the server still imports (the cell's timeout ran
    out first; the next cell waits again), for good when its import initialised CUDA or it could not start, and
    until it is started again when it died.
    """

    def __init__(self, python: str, env: dict[str, str], log_path: Path) -> None:
        self.python, self.log_path = python, log_path
        self.env = {name: value for name, value in env.items() if name != MARKER}
        self.refused: str | None = None
        # What the server said when it had imported vLLM (runners/forkserver.py's preload); None before.
        self.ready: dict | None = None
        self._lifeline: Lifeline | None = None
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._started_at = 0.0
        # The environment the server was started in, its lifeline's mark included (runners/forkserver.py's given).
        self._given: dict[str, str] = {}

    def serves(self, python: str, env: dict[str, str]) -> bool:
        """Whether cells of ``python`` in ``env`` (a lifeline's mark aside) may come from this server."""
        return python == self.python and {k: v for k, v in env.items() if k != MARKER} == self.env

    def launch(
        self, argv: list[str], *, cwd: str, env: dict[str, str], stdin: int, log: int, pgid: int, timeout_s: float
    ) -> "Forked | None":
        """Fork ``argv`` (``[runners/cell.py, SPEC, RESULT]``) into process group ``pgid`` with ``stdin``, and
        stdout and stderr on ``log``; None where the server cannot (the caller starts the cell anew)."""
        asked = time.perf_counter()
        if self.refused is None and (self._proc is None or self._proc.poll() is not None):
            self._spawn()
        if self.refused is not None or (self.ready is None and not self._await_ready(timeout_s)):
            return None
        assert self._sock is not None
        request = {"argv": argv, "cwd": cwd, "env": env, "given": self._given, "pgid": pgid,
                   "started": max(asked, self._started_at)}
        try:
            socket.send_fds(self._sock, [json.dumps(request).encode()], [stdin, log])
            pid = self.receive(timeout_s)["pid"]
        except (OSError, ConnectionError, KeyError, ValueError):
            self.close()
            return None
        return Forked(self, pid, pgid, argv)

    def receive(self, timeout_s: float | None) -> dict:
        """The server's next answer; TimeoutError when none came in ``timeout_s``, ConnectionError when it is gone."""
        assert self._sock is not None
        ready, _, _ = select.select([self._sock], [], [], timeout_s)
        if not ready:
            raise TimeoutError(f"no answer from the fork server in {timeout_s} s")
        data = self._sock.recv(MESSAGE_BYTES)
        if not data:
            raise ConnectionError("the fork server is gone")
        return json.loads(data)

    def close(self) -> None:
        """Stop the server (its lifeline kills it); the next ``launch`` starts another."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._lifeline is not None:
            self._lifeline.cut()
            self._lifeline = None
        if self._proc is not None:
            self._proc.wait()
            self._proc = None
        self.ready = None

    def _spawn(self) -> None:
        """Start the server; it imports vLLM, then says it is ready (``_await_ready``)."""
        self.close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self._started_at = time.perf_counter()
        self._lifeline = Lifeline.start()
        self._given = self._lifeline.env(self.env)
        try:
            with open(self.log_path, "ab") as out:
                self._proc = subprocess.Popen(
                    [self.python, str(FORK_SERVER_SCRIPT), str(theirs.fileno())], env=self._given,
                    stdin=self._lifeline.stdin, stdout=out, stderr=subprocess.STDOUT, pass_fds=[theirs.fileno()],
                    process_group=self._lifeline.pgid,
                )
        except OSError as exc:
            self._refuse(f"the fork server could not start: {exc}")
        finally:
            theirs.close()

    def _await_ready(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the server to have imported vLLM; False while it still imports, or when it
        refused or died (then ``refused`` says why)."""
        try:
            answer = self.receive(timeout_s)
        except TimeoutError:
            return False
        except (ConnectionError, ValueError) as exc:
            answer = {"failed": str(exc)}
        self.ready = answer.get("ready")
        if self.ready is None:
            self._refuse(answer.get("refused") or f"the fork server did not start ({answer}); see {self.log_path}")
            return False
        return True

    def _refuse(self, why: str) -> None:
        """Serve no cell of this build and environment again (one that could not import will not next time)."""
        self.refused = why
        print(f"draftbench: {why}; cells start anew", file=sys.stderr, flush=True)
        self.close()


class ForkServers:
    """The fork servers of one runner (the worker, runners/offline.py), one per build's interpreter, each replaced
    when a cell needs another environment (what vLLM reads at import must be the cell's), the ``most`` last used
    kept (an idle server holds vLLM's and torch's imports in memory: a worker of a nightly series meets many
    builds, a paired comparison two at a time); logs in ``folder``."""

    def __init__(self, folder: Path, most: int = 4) -> None:
        self.folder, self.most = folder, most
        self.servers: dict[str, ForkServer] = {}

    def get(self, python: str, env: dict[str, str], name: str) -> ForkServer:
        """The server for cells of ``python`` in ``env``: the running one when it was made for them, else a new one
        (not started until its first cell), its log ``forkserver-NAME.log``; the least recently used beyond
        ``most`` are stopped."""
        server = self.servers.pop(python, None)
        if server is None or not server.serves(python, env):
            if server is not None:
                server.close()
            server = ForkServer(python, env, self.folder / f"forkserver-{name}.log")
        self.servers[python] = server
        while len(self.servers) > self.most:
            self.servers.pop(next(iter(self.servers))).close()
        return server

    def close(self) -> None:
        """Stop every server (they die with this process anyway: their lifelines)."""
        for server in self.servers.values():
            server.close()
        self.servers.clear()


class Forked:
    """A cell forked by a ``ForkServer``: the part of ``subprocess.Popen`` that ``run`` uses (``poll``, ``wait``,
    ``returncode``). When the server dies first, the cell's group is killed and the cell ends by SIGKILL."""

    def __init__(self, server: ForkServer, pid: int, pgid: int, argv: list[str]) -> None:
        self.server, self.pid, self.pgid, self.args = server, pid, pgid, argv
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._collect(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not self._collect(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def _collect(self, timeout: float | None) -> bool:
        try:
            self.returncode = int(self.server.receive(timeout)["returncode"])
        except TimeoutError:
            return False
        except (ConnectionError, KeyError, ValueError):
            # Nobody is left to reap the cell or say how it ended: end it, and say so.
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.server.close()
            self.returncode = -signal.SIGKILL
        return True
