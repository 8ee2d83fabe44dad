"""Each command's --help names the token it needs: submit a submit-scope token, worker a host's token."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _help(command: str) -> str:
    done = subprocess.run([sys.executable, "-m", "app.cli", command, "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=os.environ | {"COLUMNS": "400"}, check=True)
    return done.stdout


@pytest.mark.parametrize(("command", "scope"), [("submit", "--scope submit"), ("worker", "--scope worker")])
def test_help_names_the_scope_of_the_token_a_command_needs(command: str, scope: str) -> None:
    text = _help(command)
    assert scope in text, text
    assert "a worker or admin token" not in text
