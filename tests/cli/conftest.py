"""A service on a free loopback port, for the CLI to talk to."""

import pytest

from app.config import Settings
from tests.conftest import TOKEN
from tests.live import serve


@pytest.fixture
def server(sqlite_url: str):
    with serve(Settings(database_url=sqlite_url, token=TOKEN)) as url:
        yield url
