"""A real ``draftbench worker`` killed by SIGKILL while its cell's engine is up, on real vLLM (CPU).

Its cell, vLLM's EngineCore and, in serving mode, vLLM's API server must be gone within seconds: on a GPU
host they hold the GPU that the requeued job needs (they ran on about 35 s before runners/lifeline.py).
The worker forks its cells from the build's fork server (runners/forkserver.py, its child): the cell is the
server's child, and its processes are its process group and everything below it in the process tree, taken while
the engine runs; all of them share one group. The fork server must go too (it dies with the worker: its own
lifeline).
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from tests import procs
from tests.conftest import AUTH, TOKEN
from tests.live import serve
from tests.vllm_fixtures import CPU_ENGINE_ARGS

pytestmark = pytest.mark.vllm
REPO = Path(__file__).resolve().parents[2]
BUILD = "vllm-cpu-doomed"
# vLLM's EngineCore logs this once its engine is ready (in serving mode, through the server's output).
ENGINE_UP = "init engine (profile, create kv cache, warmup model) took"
GONE_WITHIN_S = 5.0


def _wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out after {timeout_s:.0f} s waiting for {what}"
        time.sleep(0.5)
    return value


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", ["offline", "serve"])
def test_a_worker_killed_by_sigkill_leaves_no_cell_or_engine_running(
    mode: str, vllm_python: Path, tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'draftbench.db'}", token=TOKEN, rate_limit_per_minute=0)
    with serve(settings) as server:
        worker_log = tmp_path / "worker.log"
        with worker_log.open("wb") as out:
            worker = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "worker", "--server", server, "--token", TOKEN,
                 "--build", f"{BUILD}={vllm_python}", "--gpu-kind", "cpu", "--heartbeat", "2", "--name", "doomed"],
                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                env=os.environ | {"PYTHONUNBUFFERED": "1"},
            )
        cell: dict[int, str] = {}
        try:
            _wait_for(lambda: any(b["label"] == BUILD for b in httpx.get(f"{server}/api/v1/builds", timeout=30).json()),
                      300, "the worker to register its build")
            body = {
                "name": f"doomed-{mode}", "build": BUILD, "model": str(tiny_model), "mode": mode,
                # A window far longer than the test: the cell is mid-measurement when its worker dies.
                "workload": {"dataset": str(prompts), "num_prompts": 4, "max_tokens": 16, "warmup_prompts": 1,
                             "rounds": 1, "min_window_s": 3600},
                "speculative": [{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3,
                                 "prompt_lookup_min": 1}],
                "backends": ["CPU_ATTN"], "graph_modes": ["NONE"], "gpu_kinds": ["cpu"],
                "engine_args": dict(CPU_ENGINE_ARGS), "timeout_s": 3600,
            }
            created = httpx.post(f"{server}/api/v1/sweeps", json=body, headers=AUTH, timeout=30)
            assert created.status_code == 201, created.text
            _wait_for(lambda: ENGINE_UP in worker_log.read_text(errors="replace"), 600, "the cell's engine to start")

            [forkserver] = [pid for pid in procs.children(worker.pid) if "runners/forkserver.py" in procs.cmdline(pid)]
            [leader] = procs.children(forkserver)
            cell = procs.identities({leader, *procs.descendants(leader), *procs.group(procs.pgid(leader))})
            titles = [procs.cmdline(pid) for pid in cell]
            assert any("EngineCore" in title for title in titles), titles
            if mode == "serve":
                # The server is a fork of the cell (runners/serving.py's ForkedServer), so its command line is the
                # cell's: the cell's log names it.
                [(server_pid, parent)] = re.findall(r"vLLM's server: pid (\d+), forked from the cell's (\d+)",
                                                    worker_log.read_text(errors="replace"))
                assert int(parent) == leader and int(server_pid) in cell, (server_pid, parent, leader, titles)
            # All in one process group: vLLM's processes stay in the cell's, and so does the server.
            rows = procs.table()
            assert {rows[pid][1] for pid in cell if pid in rows} == {rows[leader][1]}, {pid: rows.get(pid) for pid in cell}
            cell |= procs.identities({forkserver})

            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)
            took = procs.seconds_until_gone(cell, GONE_WITHIN_S)
            survivors = {pid: procs.cmdline(pid)[:80] for pid in cell if procs.alive(pid)}
            assert took is not None, f"still running {GONE_WITHIN_S:.0f} s after the worker's SIGKILL: {survivors}"
            print(f"{mode}: the cell's {len(cell)} processes were gone {took:.2f} s after the worker's SIGKILL")
        finally:
            # The cell's processes, and whatever a worker still running started (the test failed early).
            if worker.poll() is None:
                cell |= procs.identities(procs.descendants(worker.pid))
                worker.kill()
                worker.wait(timeout=30)
            procs.kill_all(cell)
