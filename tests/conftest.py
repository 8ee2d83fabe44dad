"""Fixtures that build real objects: a migrated SQLite or PostgreSQL database, the app over it."""

import os
import random
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app import db
from app.api.main import create_app
from app.config import Settings
from tests import scratchdb

pytest_plugins = ["tests.vllm_fixtures", "tests.browser"]

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PG_ADMIN_URL = os.environ.get("DRAFTBENCH_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
# The prompts shipped with draftbench: the tests need nothing outside the checkout.
DATASET = Path(__file__).resolve().parents[1] / "runners" / "prompts" / "draftbench.jsonl"


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
def make_client(db_url: str) -> Iterator[Callable[..., TestClient]]:
    """Clients of apps with other settings (``make_client(rate_limit_per_minute=3)``) over the test's database.

    ``peer`` is the address the app sees the client connect from.
    """
    with ExitStack() as stack:

        def make(*, peer: str = "testclient", **overrides: Any) -> TestClient:
            app = create_app(Settings(database_url=db_url, token=TOKEN, **overrides))
            stack.callback(app.state.engine.dispose)
            return stack.enter_context(TestClient(app, client=(peer, 50000)))

        yield make


@pytest.fixture
def dataset() -> Path:
    assert DATASET.is_file(), f"the shipped prompts are missing at {DATASET}"
    return DATASET

# Hypothesis's seed for the schemathesis run (tests/api/test_schemathesis.py): a new one each run unless
# given, printed in pytest's header so a failure can be replayed.
SCHEMATHESIS_SEED = int(os.environ.get("DRAFTBENCH_SCHEMATHESIS_SEED") or random.SystemRandom().randrange(2**32))


def _seed_line() -> str:
    return f"schemathesis seed: {SCHEMATHESIS_SEED} (replay with DRAFTBENCH_SCHEMATHESIS_SEED={SCHEMATHESIS_SEED})"


def pytest_report_header() -> str:
    return _seed_line()


def pytest_terminal_summary(terminalreporter) -> None:
    # Also at the end: `make test` runs pytest -q, which prints no header.
    terminalreporter.write_line(_seed_line())
