"""The real app served by uvicorn on a free loopback port, for workers and browsers to reach."""

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from fastapi import FastAPI

from app.api.main import create_app
from app.config import Settings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serve(settings: Settings, prepare: Callable[[FastAPI], None] | None = None) -> Iterator[str]:
    """Yield the base URL of the app running in a background thread; stop it afterwards. ``prepare`` changes the app
    before it starts (a test's stand-in middleware)."""
    app = create_app(settings)
    if prepare is not None:
        prepare(app)
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
