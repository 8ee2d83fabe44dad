"""Throwaway databases for tests and benchmarks: a fresh PostgreSQL database, or a temp SQLite file."""

import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg


@contextmanager
def postgres(admin_url: str, *, prefix: str = "draftbench") -> Iterator[str]:
    """A new, empty database on the server of ``admin_url`` (a libpq URL); dropped afterwards.

    Yields the SQLAlchemy URL (psycopg 3 driver). A server that is down raises psycopg's error.
    """
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = admin_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def sqlite(*, prefix: str = "draftbench-") -> Iterator[str]:
    """A temp-file SQLite database (WAL needs a real file: ``:memory:`` is not shared by processes)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        yield f"sqlite:///{Path(folder) / 'draftbench.db'}"
