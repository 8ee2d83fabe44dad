"""The GitHub-like loopback server (``tests/ci/github_server.py``) and the real service on loopback, as the
CLI tests start it (``server``)."""

from collections.abc import Iterator

import pytest

from tests.ci.github_server import GitHubState, github
from tests.cli.conftest import server  # noqa: F401


@pytest.fixture
def gh() -> Iterator[GitHubState]:
    with github() as state:
        yield state
