"""runners/forkserver.py through runners/execute.py's ForkServer: a forked cell is a process of its own in its run's
group, whose crash, timeout and log are its own, and the server serves on; a server that cannot import vLLM leaves
every cell to start anew.

vLLM is a stand-in here (a package of three modules whose engine crashes or hangs as the cell's environment says),
so the server's import and the forking run in seconds; tests/e2e/test_sweep_on_vllm.py runs real vLLM through it.
"""

import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from runners import execute, forkserver, lifeline
from runners.worker import CELL_SCRIPT
from tests import procs

FAKE_VLLM = {
    "vllm/__init__.py": """
        import os, sys, time
        __version__ = "0.0-standin"

        class LLM:
            def __init__(self, **kwargs):
                print(f"engine pid {os.getpid()} group {os.getpgid(0)} added {os.environ.get('STANDIN_ADDED')}"
                      f" worker {'vllm.v1.worker.gpu_worker' in sys.modules}", flush=True)
                if os.environ.get("STANDIN_ENGINE") == "hang":
                    time.sleep(600)
                raise RuntimeError("EngineCore encountered a fatal error")
    """,
    "vllm/engine/__init__.py": "",
    # The engine's worker, which the server imports before any cell (forkserver.warm_engine); here without the model
    # runner, as a build may lack one of forkserver.ENGINE_MODULES. With STANDIN_WORKER=cuda its import initialises
    # CUDA, as the stand-in torch of CUDA_TORCH tells.
    "vllm/v1/__init__.py": "",
    "vllm/v1/worker/__init__.py": "",
    "vllm/v1/worker/gpu_worker.py": """
        import os
        if os.environ.get("STANDIN_WORKER") == "cuda":
            import torch
            torch.cuda.initialised = True
    """,
    "vllm/engine/arg_utils.py": """
        import dataclasses

        @dataclasses.dataclass
        class EngineArgs:
            model: str = ""
    """,
}
CUDA_TORCH = """
    class cuda:
        initialised = False

        @staticmethod
        def is_initialized():
            return cuda.initialised
"""
SPEC = {"model": "/models/none", "workload": {"dataset": "draftbench", "num_prompts": 1, "max_tokens": 1},
        "backend": "CPU_ATTN", "graph_mode": "NONE", "speculative": None}


@pytest.fixture
def standin(tmp_path: Path) -> Path:
    """A folder holding the stand-in vLLM, for PYTHONPATH."""
    for name, source in FAKE_VLLM.items():
        path = tmp_path / "site" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return tmp_path / "site"


def run_cell(server: execute.ForkServer, folder: Path, env: dict[str, str], timeout_s: float = 120) -> execute.Finished:
    folder.mkdir()
    (folder / "spec.json").write_text(json.dumps(SPEC))
    return execute.run([server.python, str(CELL_SCRIPT), str(folder / "spec.json"), str(folder / "result.json")],
                       log_path=folder / "cell.log", timeout_s=timeout_s, cwd=folder, env=env, fork_server=server,
                       poll_s=0.05)


def test_a_forked_cells_crash_is_its_own_and_the_server_forks_the_next(tmp_path: Path, standin: Path) -> None:
    env = execute.cell_env({}, None) | {"PYTHONPATH": str(standin)}
    server = execute.ForkServer(sys.executable, env, tmp_path / "forkserver.log")
    try:
        first = run_cell(server, tmp_path / "a", env | {"STANDIN_ENGINE": "crash"})
        assert server.ready is not None and server.ready["vllm"] == "0.0-standin" and not server.ready["cuda_initialised"]
        assert server.ready["engine_modules"] == ["vllm.v1.worker.gpu_worker"] and server.ready["engine_skipped"] is None
        second = run_cell(server, tmp_path / "b", env | {"STANDIN_ENGINE": "crash"})
    finally:
        server.close()
    for finished, name in ((first, "a"), (second, "b")):
        assert (finished.exit_code, finished.signal, finished.timed_out) == (1, None, False)
        log = (tmp_path / name / "cell.log").read_text()
        # The cell's own traceback in the cell's own log, from a process of its own (not the server's).
        assert "RuntimeError: EngineCore encountered a fatal error" in log and "Traceback" in log
    pids = [int((tmp_path / name / "cell.log").read_text().split("engine pid ")[1].split()[0]) for name in "ab"]
    assert pids[0] != pids[1]
    assert "fork server ready" in (tmp_path / "forkserver.log").read_text()
    # The engine's worker was imported before the cell started: the server's, not the cell's.
    assert all(" worker True" in (tmp_path / name / "cell.log").read_text() for name in "ab")


def test_a_server_leaves_out_the_engines_modules_where_their_import_initialises_cuda(tmp_path: Path, standin: Path) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(textwrap.dedent(CUDA_TORCH))
    env = execute.cell_env({}, None) | {"PYTHONPATH": f"{standin}:{tmp_path}", "STANDIN_WORKER": "cuda"}
    server = execute.ForkServer(sys.executable, env, tmp_path / "forkserver.log")
    try:
        finished = run_cell(server, tmp_path / "a", env)
        ready = server.ready
    finally:
        server.close()
    # The probe's import initialised CUDA, the server's did not: it serves, and the cell imports the worker itself.
    assert server.refused is None and ready is not None and not ready["cuda_initialised"]
    assert ready["engine_modules"] == [] and ready["engine_skipped"] == "its import initialised CUDA"
    assert finished.exit_code == 1 and " worker False" in (tmp_path / "a" / "cell.log").read_text()


def test_a_server_told_so_leaves_the_engines_modules_to_each_engine(tmp_path: Path, standin: Path) -> None:
    env = execute.cell_env({}, None) | {"PYTHONPATH": str(standin), forkserver.ENGINE_PRELOAD_ENV: "0"}
    server = execute.ForkServer(sys.executable, env, tmp_path / "forkserver.log")
    try:
        finished = run_cell(server, tmp_path / "a", env | {"STANDIN_ENGINE": "crash"})
        ready = server.ready
    finally:
        server.close()
    assert ready is not None and ready["engine_modules"] == [] and ready["engine_import_s"] is None
    assert ready["engine_skipped"] == "DRAFTBENCH_ENGINE_PRELOAD=0"
    # The cell's engine imported its worker itself, as before the server imported it.
    assert finished.exit_code == 1 and " worker False" in (tmp_path / "a" / "cell.log").read_text()


def test_a_forked_cell_that_hangs_is_ended_by_its_timeout_with_its_group(tmp_path: Path, standin: Path) -> None:
    env = execute.cell_env({}, None) | {"PYTHONPATH": str(standin)}
    server = execute.ForkServer(sys.executable, env, tmp_path / "forkserver.log")
    try:
        # The first cell waits for the server's import (the cell that starts the server pays for it).
        assert run_cell(server, tmp_path / "warm", env).exit_code == 1
        started = time.monotonic()
        finished = run_cell(server, tmp_path / "hang", env | {"STANDIN_ENGINE": "hang"}, timeout_s=3)
        log = (tmp_path / "hang" / "cell.log").read_text()
        pid, group = (int(word) for word in log.split("engine pid ")[1].split()[:3:2])
        # Forked into the group of its run, not the server's: the group's SIGTERM ended it.
        [forkserver] = [p for p in procs.children(os.getpid()) if "runners/forkserver.py" in procs.cmdline(p)]
        assert group != procs.pgid(forkserver)
        assert finished.timed_out and finished.signal == signal.SIGTERM and time.monotonic() - started < 30
        assert not procs.alive(pid)
        assert run_cell(server, tmp_path / "after", env).exit_code == 1  # still serving
    finally:
        server.close()


def test_a_build_whose_server_cannot_import_vllm_starts_its_cells_anew(tmp_path: Path) -> None:
    env = execute.cell_env({}, None)  # no vLLM on this Python's path
    server = execute.ForkServer(sys.executable, env, tmp_path / "forkserver.log")
    finished = run_cell(server, tmp_path / "a", env)
    assert server.refused is not None and "fork server did not start" in server.refused
    assert "No module named 'vllm'" in (tmp_path / "forkserver.log").read_text()
    # The cell ran all the same, in a Python of its own, and failed as such a cell does.
    assert finished.exit_code == 1 and "No module named 'vllm'" in (tmp_path / "a" / "cell.log").read_text()
    size = (tmp_path / "forkserver.log").stat().st_size
    assert run_cell(server, tmp_path / "b", env).exit_code == 1
    assert (tmp_path / "forkserver.log").stat().st_size == size  # not started again


def test_what_a_builds_wrapper_adds_reaches_each_forked_cell(tmp_path: Path, standin: Path) -> None:
    """A patched build's interpreter is a script that puts its copy of vLLM on PYTHONPATH, then runs Python: a cell
    started anew has it, and so must a forked one and what it spawns (the CPU engine core, a serving cell's server)."""
    wrapper = tmp_path / "build" / "python"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nSTANDIN_ADDED=by-the-wrapper exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    env = execute.cell_env({}, None) | {"PYTHONPATH": str(standin)}
    server = execute.ForkServer(str(wrapper), env, tmp_path / "forkserver.log")
    try:
        assert run_cell(server, tmp_path / "a", env).exit_code == 1
    finally:
        server.close()
    assert "fork server ready" in (tmp_path / "forkserver.log").read_text()  # forked, not started anew
    assert "added by-the-wrapper" in (tmp_path / "a" / "cell.log").read_text()
    given, started = {"PATH": "/bin", "PYTHONPATH": "/site"}, {"PATH": "/bin", "PYTHONPATH": "/patched:/site", "NEW": "1"}
    assert forkserver.cell_environment({"PATH": "/usr/bin", "PYTHONPATH": "/site", "CELL": "x"}, given, started) == {
        "PATH": "/usr/bin", "PYTHONPATH": "/patched:/site", "NEW": "1", "CELL": "x"}


def test_a_server_serves_cells_of_its_environment_whatever_their_mark(tmp_path: Path) -> None:
    servers = execute.ForkServers(tmp_path)
    env = {"PATH": "/bin", "VLLM_USE_V2_MODEL_RUNNER": "0"}
    one = servers.get("/venv/bin/python", env | {lifeline.MARKER: "a"}, "b1")
    assert servers.get("/venv/bin/python", env | {lifeline.MARKER: "b"}, "b1") is one
    other = servers.get("/venv/bin/python", env | {"VLLM_USE_V2_MODEL_RUNNER": "1"}, "b1")
    assert other is not one and servers.servers == {"/venv/bin/python": other}
    assert other.log_path == tmp_path / "forkserver-b1.log"


def test_the_servers_of_the_builds_used_longest_ago_are_stopped(tmp_path: Path, standin: Path) -> None:
    servers = execute.ForkServers(tmp_path, most=2)
    env = execute.cell_env({}, None) | {"PYTHONPATH": str(standin)}
    pythons = []
    for name in ("a", "b"):  # two builds' interpreters, each a link to this Python, as a venv's is
        (tmp_path / name).mkdir()
        (tmp_path / name / "python").symlink_to(sys.executable)
        pythons.append(str(tmp_path / name / "python"))
    first = servers.get(pythons[0], env, "a")
    try:
        assert run_cell(first, tmp_path / "cell-a", env).exit_code == 1 and first.ready is not None
        servers.get(pythons[1], env, "b")
        assert servers.get(pythons[0], env, "a") is first  # used again: now the newest
        servers.get("/venv/c/python", env, "c")
        assert list(servers.servers) == [pythons[0], "/venv/c/python"] and first.ready is not None
        servers.get("/venv/d/python", env, "d")
        assert list(servers.servers) == ["/venv/c/python", "/venv/d/python"]
        assert first.ready is None and not [p for p in procs.children(os.getpid()) if "forkserver" in procs.cmdline(p)]
    finally:
        servers.close()
