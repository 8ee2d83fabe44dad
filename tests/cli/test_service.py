"""``draftbench serve`` as a process: what uvicorn in front of the app does with the client's headers and settings."""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.conftest import TOKEN

DRAFTBENCH = Path(sys.executable).with_name("draftbench")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def _serving(database_url: str, **env: str) -> Iterator[str]:
    port = _free_port()
    environ = os.environ | {"DRAFTBENCH_TOKEN": TOKEN, "DRAFTBENCH_DATABASE_URL": database_url} | env
    process = subprocess.Popen([DRAFTBENCH, "serve", "--port", str(port)], env=environ,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.stderr.read().decode()
            try:
                httpx.get(f"{url}/api/v1/sweeps", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "draftbench serve did not answer within 60 s"
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_serve_takes_no_forwarded_for_from_loopback_by_default(db_url: str) -> None:
    # uvicorn's proxy headers trusted 127.0.0.1: each forged X-Forwarded-For got a fresh bucket.
    with _serving(db_url, DRAFTBENCH_FAILED_AUTH_PER_MINUTE="2") as url:
        codes = [
            httpx.post(f"{url}/api/v1/workers", json={}, timeout=10,
                       headers={"Authorization": "Bearer dbk_guess", "X-Forwarded-For": f"198.51.100.{n}"}).status_code
            for n in (1, 2, 3)
        ]
    assert codes == [401, 401, 429]


def test_serve_refuses_a_bad_trusted_proxies_setting_naming_it(tmp_path: Path) -> None:
    environ = os.environ | {"DRAFTBENCH_TOKEN": TOKEN, "DRAFTBENCH_TRUSTED_PROXIES": "10.0.0.1/8, proxy.local"}
    done = subprocess.run([DRAFTBENCH, "serve", "--port", str(_free_port()), "--database-url",
                           f"sqlite:///{tmp_path / 'db.sqlite'}"], env=environ, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    assert "DRAFTBENCH_TRUSTED_PROXIES" in done.stderr and "'10.0.0.1/8'" in done.stderr
    assert not (tmp_path / "db.sqlite").exists()  # refused before anything started
