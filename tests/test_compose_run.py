"""docker-compose.yml's commands, run as plain processes: what ``docker compose up`` would run.

Docker cannot run on the test machines. These tests take the api and gpu-worker services'
``command``, ``environment`` and healthcheck from the compose file, resolve its ``${...}``
variables as compose does, and run them here against a fresh PostgreSQL database: ``draftbench
serve`` must migrate and answer its own healthcheck, and the worker line (``--gpus all``, one
process per GPU; a stand-in nvidia-smi lists two H200) must register one worker per GPU.
Only what cannot exist outside the containers is swapped: the ``postgres`` and ``api`` host
names, the port, the ``/root`` cache folders, and the vLLM image's interpreter (the worker checks
that its build imports vLLM before it registers: the CPU build stands in).
"""

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import TOKEN, _pg_database
from tests.fake_gpus import fake_nvidia_smi

ROOT = Path(__file__).resolve().parents[1]
DRAFTBENCH = Path(sys.executable).with_name("draftbench")
_VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:-|:\?)(?P<arg>[^}]*))?\}")

pytestmark = pytest.mark.pg


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}``; raises KeyError like compose refuses."""

    def one(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"]
        if env.get(name):
            return env[name]
        if op == ":-":
            return arg
        if op == ":?":
            raise KeyError(f"{name}: {arg}")
        return ""

    return _VARIABLE.sub(one, value)


def test_interpolate_follows_compose() -> None:
    env = {"SET": "x", "EMPTY": ""}
    assert interpolate("a-${SET}-${UNSET:-d}-${EMPTY:-e}", env) == "a-x-d-e"
    with pytest.raises(KeyError, match="set it"):
        interpolate("${UNSET:?set it}", env)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _service_env(compose: dict[str, Any], service: str, env: Mapping[str, str]) -> dict[str, str]:
    return {key: interpolate(str(value), env) for key, value in compose["services"][service]["environment"].items()}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _replace_option(argv: list[str], option: str, value: str) -> list[str]:
    i = argv.index(option)
    return [*argv[: i + 1], value, *argv[i + 2 :]]


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    yield from _pg_database()


@pytest.fixture(scope="module")
def api(compose: dict[str, Any], pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The api service's command and environment, on a free port, over a fresh database (one per module)."""
    tmp_path = tmp_path_factory.mktemp("api")
    service = compose["services"]["api"]
    outer = {"DRAFTBENCH_TOKEN": TOKEN}
    env = os.environ | _service_env(compose, "api", outer)
    assert env["DRAFTBENCH_DATABASE_URL"].endswith("@postgres:5432/draftbench")
    env["DRAFTBENCH_DATABASE_URL"] = pg_url
    port = _free_port()
    argv = _replace_option(_replace_option(list(service["command"]), "--port", str(port)), "--host", "127.0.0.1")
    assert argv[0] == "draftbench"
    log = (tmp_path / "api.log").open("wb")
    proc = subprocess.Popen([str(DRAFTBENCH), *argv[1:]], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        _wait_healthy(service["healthcheck"]["test"], port, proc, tmp_path / "api.log")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _wait_healthy(test: list[str], port: int, proc: subprocess.Popen, log: Path, timeout_s: float = 90) -> None:
    """Run the compose healthcheck (``CMD python -c ...``) against our port until it passes."""
    assert test[:2] == ["CMD", "python"]
    check = [sys.executable, *[arg.replace(":8000/", f":{port}/") for arg in test[2:]]]
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, f"draftbench serve exited with {proc.returncode}:\n{log.read_text()}"
        if subprocess.run(check, capture_output=True, timeout=30).returncode == 0:
            return
        assert time.monotonic() < deadline, f"the api never passed its healthcheck:\n{log.read_text()}"
        time.sleep(0.5)


def test_api_command_migrates_and_serves(api: str) -> None:
    with httpx.Client(base_url=api, timeout=30) as http:
        assert http.get("/api/v1/sweeps").json() == []
        metrics = http.get("/metrics")
        assert metrics.status_code == 200 and "draftbench_database_up 1.0" in metrics.text
        # Writes need the token compose passes in.
        assert http.post("/api/v1/workers/1/claim").status_code in (401, 403)


@pytest.mark.vllm
def test_worker_command_starts_one_registered_worker_per_gpu(
    compose: dict[str, Any], api: str, tmp_path: Path, vllm_python: Path
) -> None:
    service = compose["services"]["gpu-worker"]
    env = {key: value for key, value in os.environ.items() if key != "CUDA_VISIBLE_DEVICES"}
    env |= _service_env(compose, "gpu-worker", {"DRAFTBENCH_TOKEN": TOKEN})
    env |= {"HF_HOME": str(tmp_path / "hf"), "PATH": fake_nvidia_smi(tmp_path / "bin")}
    argv = [interpolate(str(arg), {}) for arg in service["command"]]
    assert argv[:2] == ["draftbench", "worker"] and argv[argv.index("--gpus") + 1] == "all"
    argv = _replace_option(argv, "--server", api)
    label, _, image_python = argv[argv.index("--build") + 1].partition("=")
    assert image_python == "/usr/bin/python3"
    argv = _replace_option(argv, "--build", f"{label}={vllm_python}")
    # The same line; it leaves once the queue is empty instead of polling forever.
    done = subprocess.run([str(DRAFTBENCH), *argv[1:], "--exit-when-idle", "--quiet"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    workers = httpx.get(f"{api}/api/v1/workers", timeout=30).json()
    assert sorted(w["name"].rsplit("-", 1)[1] for w in workers) == ["gpu0", "gpu1"]
    for worker in workers:
        assert worker["gpu_kinds"] == ["H200"] and worker["gpu_count"] == 1 and worker["alive"]
        assert worker["builds"] == ["vllm-v0.26.0"]


def _heartbeats_counted(api: str) -> float:
    # A new connection each time: a scrape may reach any of the api's processes.
    text = httpx.get(f"{api}/metrics", timeout=30).text
    [value] = [line.split()[-1] for line in text.splitlines() if line.startswith("draftbench_worker_heartbeats_total ")]
    return float(value)


def test_every_scrape_counts_what_all_api_processes_saw(compose: dict[str, Any], api: str) -> None:
    assert int(compose["services"]["api"]["command"][-1]) > 1  # the api runs several processes
    auth = {"Authorization": f"Bearer {TOKEN}"}
    worker = {"name": "counted", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "b"}]}
    registered = httpx.post(f"{api}/api/v1/workers", json=worker, headers=auth, timeout=30).json()
    own = {"Authorization": f"Bearer {registered['credential']}"}
    before = _heartbeats_counted(api)
    for _ in range(20):
        beat = httpx.post(f"{api}/api/v1/workers/{registered['id']}/heartbeat", json={"job_ids": []}, headers=own, timeout=30)
        assert beat.status_code == 200
    assert [_heartbeats_counted(api) for _ in range(10)] == [before + 20] * 10
