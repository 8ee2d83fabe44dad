"""The worker's cells keep Python's bytecode in one cache, and its build check fills it (real vLLM, CPU); one
job's refused report or unreadable cell fails that job alone, and the worker goes on claiming."""

import logging
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app import db
from app.config import Settings
from app.enums import GpuKind
from app.models import Job
from runners.client import ServiceClient
from runners.execute import bytecode_env
from runners.worker import Build, Worker
from tests.conftest import AUTH, TOKEN
from tests.factories import sweep_body
from tests.live import serve


def test_bytecode_env_allows_writing_and_points_python_at_the_cache(tmp_path: Path) -> None:
    env = bytecode_env({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/elsewhere", "PATH": "/bin"}, tmp_path)
    assert env == {"PYTHONPYCACHEPREFIX": str(tmp_path), "PATH": "/bin"}


def test_a_worker_without_a_cache_leaves_the_bytecode_settings_as_inherited(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    plain = Worker(client=None, builds=[], gpu_kinds=[GpuKind.CPU], pycache=None)  # type: ignore[arg-type]
    env = plain.cell_env(0)
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and "PYTHONPYCACHEPREFIX" not in env
    cached = Worker(client=None, builds=[], gpu_kinds=[GpuKind.CPU], pycache=tmp_path)  # type: ignore[arg-type]
    env = cached.cell_env(0, {"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["PYTHONPYCACHEPREFIX"] == str(tmp_path)
    assert env["VLLM_USE_V2_MODEL_RUNNER"] == "0"


def test_a_workers_cells_share_its_compile_caches(monkeypatch, tmp_path: Path) -> None:
    """vLLM keeps torch.compile's graphs, and sets Inductor's and Triton's caches, under VLLM_CACHE_ROOT (by default
    XDG_CACHE_HOME or HOME's .cache/vllm): every cell of a worker, forked or started anew, whatever its GPUs or vLLM
    variables, gets the worker's, so a graph compiled by one cell is loaded by the next."""
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "vllm"))
    worker = Worker(client=None, builds=[], gpu_kinds=[GpuKind.CPU], gpu_ids=["0", "1"], pycache=tmp_path)  # type: ignore[arg-type]
    one, other = worker.cell_env(1), worker.cell_env(2, {"VLLM_USE_V2_MODEL_RUNNER": "1"})
    for name in ("HOME", "XDG_CACHE_HOME", "VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        assert one.get(name) == other.get(name) == os.environ.get(name), name


@pytest.mark.vllm
def test_the_build_check_compiles_what_a_cell_imports_into_the_cache(vllm_python: Path, tmp_path: Path, monkeypatch) -> None:
    # As on the H200 machine: Python may not write bytecode. The check, run in the cells' environment,
    # still leaves vLLM's engine API compiled in the worker's cache, where the cells read it.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    cache = tmp_path / "pycache"
    worker = Worker(client=None, builds=[], gpu_kinds=[GpuKind.CPU], pycache=cache)  # type: ignore[arg-type]
    version = Build("cpu", vllm_python).vllm_version(env=worker.cell_env(0))
    assert version == "0.32.0"
    compiled = {path.name.split(".")[0] for path in cache.rglob("*.pyc") if "vllm" in path.parts}
    assert {"arg_utils", "llm", "__init__"} <= compiled


# A build's interpreter that runs no vLLM: it answers the build check with a version and plays the cell its
# sweep's model names (the last part of the path) as a separate process, as the worker runs every cell.
FAKE_INTERPRETER = """#!{python}
import json, sys

if sys.argv[1] == "-c":  # the worker's build check
    print("0.32.0")
    sys.exit(0)
spec = json.load(open(sys.argv[2]))
play = spec["model"].rsplit("/", 1)[-1]
if play == "nul-crash":
    print("Traceback (most recent call last):")
    print('  File "/venv/lib/python3.11/site-packages/vllm/v1/engine/core.py", line 88, in run_engine_core')
    print("RuntimeError: unexpected token '" + chr(0) + "' in the vocabulary", flush=True)
    sys.exit(1)
n = spec["workload"]["num_prompts"]
result = {{
    "engine_start_s": 1.0, "warmup_s": 0.1, "generation_s": 1.0, "num_requests": n, "prompt_tokens": 8 * n,
    "output_tokens": 8 * n, "tokens_per_s": 8.0 * n, "requests_per_s": float(n), "output_fingerprint": "f" * 64,
    "requests": [{{"num_output_tokens": 8, "fingerprint": f"{{i:016x}}"}} for i in range(n)],
}}
json.dump(result, open(sys.argv[3], "w"))
print("cell result written")
"""


def interpreter(folder: Path, script: str) -> Path:
    """An executable ``python`` in ``folder`` running ``script`` (a template given this Python's path)."""
    path = folder / "python"
    path.parent.mkdir()
    path.write_text(script.format(python=sys.executable))
    path.chmod(0o755)
    return path


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    return interpreter(tmp_path / "fake-build", FAKE_INTERPRETER)


def submit_play(server: str, dataset: Path, play: str, build: str, *, workload: dict | None = None, **fields: Any) -> int:
    """The job of a one-cell sweep on ``build`` whose model names the ``play`` its interpreter acts."""
    body = sweep_body(dataset, name=play, build=build, model=f"/models/{play}", repeats=1,
                      speculative=[{"method": "ngram", "num_speculative_tokens": 3}]) | fields
    body["workload"] |= workload or {}
    response = httpx.post(f"{server}/api/v1/sweeps", json=body, headers=AUTH, timeout=30)
    assert response.status_code == 201, response.text
    [job] = response.json()["jobs"]
    return job["job_id"]


def _submit(server: str, dataset: Path, play: str, **workload: Any) -> int:
    return submit_play(server, dataset, play, "fake", workload=workload)


def _job(server: str, job_id: int) -> dict[str, Any]:
    return httpx.get(f"{server}/api/v1/jobs/{job_id}", timeout=30).json()


def _worker(server: str, python: Path, workdir: Path) -> Worker:
    client = ServiceClient(server, TOKEN, retry_for_s=10)
    worker = Worker(client, builds=[Build("fake", python)], gpu_kinds=[GpuKind.CPU], workdir=workdir, heartbeat_s=1,
                    echo=False, pycache=None)
    worker.register()
    return worker


def test_a_refused_report_fails_its_job_and_the_worker_goes_on(db_url, dataset, fake_python, tmp_path, caplog) -> None:
    # Bodies of at most 64 KiB: the report of 5,000 requests (about 0.3 MB) is refused with 413.
    limit = 64 * 1024
    settings = Settings(database_url=db_url, token=TOKEN, max_body_bytes=limit, max_log_bytes=limit, rate_limit_per_minute=0)
    with serve(settings) as server:
        worker = _worker(server, fake_python, tmp_path / "work")
        # On PostgreSQL a NUL byte in the exception line was refused (422) and stopped the worker.
        crashed = _submit(server, dataset, "nul-crash")
        refused = _submit(server, dataset, "big-report", num_prompts=5000)
        ran = _submit(server, dataset, "ok", num_prompts=4)
        with caplog.at_level(logging.INFO, logger="draftbench.worker"):
            try:
                assert worker.run(exit_when_idle=True) == 3
            finally:
                worker.client.close()
        crash = _job(server, crashed)
        assert crash["state"] == "crashed" and "unexpected token" in crash["error"] and "\x00" not in crash["error"]
        assert "'\x00'" in httpx.get(f"{server}/api/v1/jobs/{crashed}/log", timeout=30).text
        job = _job(server, refused)
        assert job["state"] == "failed"
        refusal = f"the service refused the worker's report (413): request body is larger than the limit of {limit}"
        assert job["error"].startswith(refusal)
        assert f"job {refused}: the service refused its report, reporting the job failed" in caplog.text
        assert _job(server, ran)["state"] == "succeeded"
        [row] = httpx.get(f"{server}/api/v1/results", timeout=30).json()
        assert row["job_id"] == ran and row["num_requests"] == 4


def test_a_cell_the_worker_cannot_read_fails_alone(db_url, dataset, fake_python, tmp_path, caplog) -> None:
    with serve(Settings(database_url=db_url, token=TOKEN, rate_limit_per_minute=0)) as server:
        worker = _worker(server, fake_python, tmp_path / "work")
        unreadable, ran = _submit(server, dataset, "from-a-newer-service"), _submit(server, dataset, "ok", num_prompts=2)
        # As a newer service would hand out: a field this worker's CellSpec does not know.
        engine = db.make_engine(db_url)
        with db.make_sessionmaker(engine).begin() as session:
            job = session.scalars(select(Job).where(Job.id == unreadable)).one()
            job.spec = job.spec | {"a_field_of_tomorrow": 1}
        engine.dispose()
        with caplog.at_level(logging.INFO, logger="draftbench.worker"):
            try:
                assert worker.run(exit_when_idle=True) == 2
            finally:
                worker.client.close()
        job = _job(server, unreadable)
        assert job["state"] == "failed" and job["error"].startswith("the worker cannot read this cell:")
        assert "a_field_of_tomorrow" in job["error"] and "a_field_of_tomorrow" in caplog.text
        assert _job(server, ran)["state"] == "succeeded"


def test_a_builds_interpreter_is_made_absolute_and_a_bare_name_found_on_path(tmp_path: Path, monkeypatch) -> None:
    # Cells run in their own folders: "python3" or "venv/bin/python" given at start named nothing there.
    on_path = tmp_path / "bin" / "python3"
    on_path.parent.mkdir()
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)
    monkeypatch.setenv("PATH", str(on_path.parent))
    monkeypatch.chdir(tmp_path)
    assert Build.parse("b=python3").python == on_path
    assert Build.parse("b=venv/bin/python").python == tmp_path / "venv" / "bin" / "python"
    link = tmp_path / "venv" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(on_path)
    assert Build.parse(f"b={link}").python == link  # not resolved: a virtual environment's python is a link


def test_labels_of_one_interpreter_import_vllm_once_at_registration(db_url: str, tmp_path: Path) -> None:
    """A bisection's series names a build per commit, its unchanged commits on one interpreter: 16 labels over 3
    interpreters took 16 imports of vLLM (20-40 s each on the CI host) before the worker's first claim."""
    pythons = []
    for name in ("base", "patched"):
        path = tmp_path / name / "python"
        path.parent.mkdir()
        path.write_text(f"#!/bin/sh\necho import >> {tmp_path / name / 'imports'}\necho 0.32.0\n")
        path.chmod(0o755)
        pythons.append(path)
    builds = [Build(f"s{i}", pythons[i >= 3]) for i in range(5)]
    with serve(Settings(database_url=db_url, token=TOKEN)) as server:
        client = ServiceClient(server, TOKEN, retry_for_s=10)
        Worker(client, builds=builds, gpu_kinds=[GpuKind.CPU], workdir=tmp_path / "work", echo=False, pycache=None).register()
        registered = httpx.get(f"{server}/api/v1/builds", timeout=30).json()
        client.close()
    assert sorted((b["label"], b["vllm_version"]) for b in registered) == [(f"s{i}", "0.32.0") for i in range(5)]
    assert [(p.parent / "imports").read_text().count("import") for p in pythons] == [1, 1]
