"""A broken or hostile vLLM is data, never the worker's end: each cell below is recorded (crashed, timed out, failed
with the reason) and the worker goes on to the next job, in bounded time and memory.

The build's interpreter plays the cell its sweep's model names (the last part of the path), as
tests/runners/test_worker.py's does.
"""

import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import Settings, get_settings
from app.enums import GpuKind
from app.schemas.cell import JobOutcome
from runners.client import ServiceClient, ServiceRefused, ServiceUnreachable
from runners.worker import Build, Worker, _LogSender
from tests.conftest import TOKEN
from tests.live import serve
from tests.runners.test_worker import interpreter, submit_play

HOSTILE_INTERPRETER = """#!{python}
import json, os, signal, sys, time

if sys.argv[1] == "-c":  # the worker's build check
    print("0.32.0")
    sys.exit(0)
if not sys.argv[1].endswith("cell.py"):  # a fork server: none here, cells start anew
    sys.exit(3)
spec = json.load(open(sys.argv[2]))
play, out = spec["model"].rsplit("/", 1)[-1], sys.argv[3]
n = spec["workload"]["num_prompts"]
result = {{
    "engine_start_s": 1.0, "warmup_s": 0.1, "generation_s": 1.0, "num_requests": n, "prompt_tokens": 8 * n,
    "output_tokens": 8 * n, "tokens_per_s": 8.0 * n, "requests_per_s": float(n), "output_fingerprint": "f" * 64,
    "requests": [{{"num_output_tokens": 8, "fingerprint": f"{{i:016x}}"}} for i in range(n)],
}}
if play == "flood":  # 24 MiB on stdout and stderr, a line of 8 MiB among them, then a result
    chunk = b"x" * (1 << 20)
    for i in range(8):
        os.write(1, chunk + b"\\n")
        os.write(2, chunk + b"\\n")
    os.write(1, chunk * 8 + b"\\n")
elif play == "bad-utf8":
    os.write(1, b"\\xff\\xfe\\xc3(\\xed\\xa0\\x80 RuntimeError: CUDA error: an illegal memory access was encountered\\n")
    sys.exit(1)
elif play == "nan-result":
    open(out, "w").write(json.dumps(result | {{"tokens_per_s": float("nan")}}))
    sys.exit(0)
elif play == "huge-result":
    open(out, "w").write(json.dumps(result) + " " * (3 << 20))
    sys.exit(0)
elif play == "result-is-a-fifo":
    os.mkfifo(out)
    sys.exit(0)
elif play == "no-result":
    sys.exit(0)
elif play == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
elif play == "sigsegv":
    os.kill(os.getpid(), signal.SIGSEGV)
elif play == "orphan":  # a child in a session of its own outlives the cell and holds its stdout
    if os.fork() == 0:
        os.setsid()
        time.sleep(600)
        os._exit(0)
    json.dump(result, open(out, "w"))
    sys.exit(0)
elif play == "ignores-sigterm":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)
json.dump(result, open(out, "w"))
print("cell result written")
"""


@pytest.fixture
def hostile_python(tmp_path: Path) -> Path:
    return interpreter(tmp_path / "hostile-build", HOSTILE_INTERPRETER)


def _submit(server: str, dataset: Path, play: str, **fields: Any) -> int:
    return submit_play(server, dataset, play, "hostile", **fields)


def _job(server: str, job_id: int) -> dict[str, Any]:
    return httpx.get(f"{server}/api/v1/jobs/{job_id}", timeout=30).json()


def test_each_hostile_cell_is_recorded_and_the_worker_goes_on(sqlite_url, dataset, hostile_python, tmp_path, caplog,
                                                              monkeypatch) -> None:
    # The worker holds a result.json to its own DRAFTBENCH_MAX_LOG_BYTES, as the service holds its report.
    monkeypatch.setenv("DRAFTBENCH_MAX_LOG_BYTES", str(2 << 20))
    get_settings.cache_clear()
    settings = Settings(database_url=sqlite_url, token=TOKEN, rate_limit_per_minute=0, max_log_bytes=2 << 20)
    with serve(settings) as server:
        client = ServiceClient(server, TOKEN, retry_for_s=10)
        worker = Worker(client, builds=[Build("hostile", hostile_python)], gpu_kinds=[GpuKind.CPU],
                        workdir=tmp_path / "work", heartbeat_s=1, echo=False, pycache=None)
        worker.register()
        jobs = {play: _submit(server, dataset, play) for play in
                ("flood", "bad-utf8", "nan-result", "huge-result", "result-is-a-fifo", "no-result", "sigkill", "sigsegv",
                 "orphan")}
        jobs["ignores-sigterm"] = _submit(server, dataset, "ignores-sigterm", timeout_s=1)
        jobs["ok"] = _submit(server, dataset, "ok")
        began = time.monotonic()
        with caplog.at_level(logging.INFO, logger="draftbench.worker"):
            try:
                assert worker.run(exit_when_idle=True) == len(jobs)
            finally:
                worker.close()
                client.close()
        assert time.monotonic() - began < 90
        state = {play: _job(server, job_id) for play, job_id in jobs.items()}
        flood_log = httpx.get(f"{server}/api/v1/jobs/{jobs['flood']}/log", timeout=30).text
    get_settings.cache_clear()
    # Over the service's log limit: its head and tail arrive, cut to fit, the end that names a root cause kept.
    assert "draftbench cut the middle of this log" in flood_log and flood_log.rstrip().endswith("cell result written")
    assert state["flood"]["state"] == "succeeded"
    assert state["bad-utf8"]["state"] == "crashed" and "illegal memory access" in state["bad-utf8"]["error"]
    assert state["nan-result"]["state"] == "failed" and "tokens_per_s" in state["nan-result"]["error"]
    assert state["huge-result"]["state"] == "failed" and "over the limit" in state["huge-result"]["error"]
    assert state["result-is-a-fifo"]["state"] == "failed" and "FIFO" in state["result-is-a-fifo"]["error"]
    assert state["no-result"]["state"] == "failed" and "wrote no result" in state["no-result"]["error"]
    assert state["sigkill"]["state"] == "crashed" and state["sigsegv"]["state"] == "crashed"
    assert state["orphan"]["state"] == "succeeded"
    assert state["ignores-sigterm"]["state"] == "timed_out"
    assert state["ok"]["state"] == "succeeded"


class _Unreachable:
    """A service that answers the log but never takes a report, as one answering 500 for the whole retry window."""

    def upload_log(self, job_id: int, text: str) -> None:
        pass

    def complete(self, job_id: int, outcome: Any) -> None:
        raise ServiceUnreachable(f"POST /api/v1/jobs/{job_id}/complete kept failing for 600 s: HTTP 500")


def test_a_report_that_cannot_reach_the_service_leaves_the_job_to_its_lease_and_the_worker_goes_on(tmp_path) -> None:
    worker = Worker(_Unreachable(), builds=[], gpu_kinds=[GpuKind.CPU], workdir=tmp_path, echo=False,  # type: ignore[arg-type]
                    pycache=None, fork=False)
    assert worker._report(7, "log", JobOutcome(error="x")) is None


class _TakesAtMost:
    """A service that refuses a log over `limit` bytes with 413, as the real one does over DRAFTBENCH_MAX_LOG_BYTES."""

    def __init__(self, limit: int) -> None:
        self.limit, self.sizes = limit, []

    def upload_log(self, job_id: int, text: str) -> None:
        self.sizes.append(len(text.encode()))
        if self.sizes[-1] > self.limit:
            raise ServiceRefused(413, f"request body is larger than the limit of {self.limit}")


def test_a_log_over_the_limit_is_cut_once_and_later_beats_start_from_the_size_that_fit() -> None:
    service = _TakesAtMost(100_000)
    sender = _LogSender(service, 7)  # type: ignore[arg-type]
    assert sender.send("x" * 1_000_000) is None
    # The whole log refused, a quarter refused, 64 KiB taken.
    whole, quarter, taken = service.sizes
    assert whole == 1_000_000 and 249_000 < quarter <= 250_000 and 65_000 < taken <= 65_536
    service.sizes.clear()
    # The next beat's longer log goes at the size that fit, not whole again, and keeps its end.
    assert sender.send("y" * 1_200_000 + "the root cause") is None
    assert service.sizes == [taken]
    # A log under that size still goes whole.
    service.sizes.clear()
    assert sender.send("short log") is None and service.sizes == [9]


def test_a_log_that_fits_is_sent_whole_every_beat() -> None:
    service = _TakesAtMost(100_000)
    sender = _LogSender(service, 7)  # type: ignore[arg-type]
    assert sender.send("a" * 50_000) is None and sender.send("a" * 90_000) is None
    assert service.sizes == [50_000, 90_000]
