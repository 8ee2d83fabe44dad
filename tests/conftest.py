"""Fixtures that build real objects: a migrated SQLite or PostgreSQL database, the app over it."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app import db, scratchdb
from app.config import Settings
from app.main import create_app

pytest_plugins = ["tests.vllm_fixtures"]

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PG_ADMIN_URL = os.environ.get("DRAFTBENCH_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
DATASET = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "spec_bench_questions.jsonl"


def _pg_database() -> Iterator[str]:
    """A new, empty PostgreSQL database for one test, dropped afterwards.

    The server on this machine is part of the test environment: if it is down the test fails
    with the connection error, it is never skipped.
    """
    with scratchdb.postgres(PG_ADMIN_URL) as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'draftbench.db'}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from _pg_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each test that takes this runs once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'draftbench.db'}"
    else:
        yield from _pg_database()


@pytest.fixture
def migrated_sessions(db_url: str) -> Iterator[sessionmaker[Session]]:
    db.upgrade(db_url)
    engine = db.make_engine(db_url)
    yield db.make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def settings(db_url: str) -> Settings:
    return Settings(database_url=db_url, token=TOKEN)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    app = create_app(settings)
    with TestClient(app) as test_client:
        yield test_client
    app.state.engine.dispose()


@pytest.fixture
def dataset() -> Path:
    assert DATASET.is_file(), f"Spec-Bench dataset missing at {DATASET} (shared/ must sit beside the checkout)"
    return DATASET
