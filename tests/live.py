"""The real app served by uvicorn on a free loopback port, for workers and browsers to reach."""

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from app.api.main import create_app
from app.config import Settings
from runners.worker import Worker


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serve(settings: Settings) -> Iterator[str]:
    """Yield the base URL of the app running in a background thread; stop it afterwards."""
    app = create_app(settings)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{url}/api/v1/sweeps", timeout=1).raise_for_status()
            break
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        app.state.engine.dispose()


def beside_worker(worker: Worker, command: list[str], *, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """``command`` (a CLI that submits sweeps and waits for them) run to its end while ``worker`` runs their cells."""
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()

    def run_cells() -> None:
        while not stop.is_set():
            worker.run(exit_when_idle=True)
            stop.wait(0.5)

    runner = threading.Thread(target=run_cells, daemon=True)
    runner.start()
    try:
        out, err = process.communicate(timeout=900)
    finally:
        stop.set()
        runner.join(timeout=900)
    return subprocess.CompletedProcess(command, process.returncode, out, err)
