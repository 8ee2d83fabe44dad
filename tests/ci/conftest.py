"""The GitHub-like loopback server (``tests/ci/github_server.py``) as a fixture."""

from collections.abc import Iterator

import pytest

from tests.ci.github_server import GitHubState, github


@pytest.fixture
def gh() -> Iterator[GitHubState]:
    with github() as state:
        yield state


# The real service on loopback, as the CLI tests start it.
from tests.cli.conftest import server  # noqa: E402, F401
