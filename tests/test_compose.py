"""docker-compose.yml and the Dockerfile, checked without a Docker engine: schema, GPUs, caches, commands.

Docker cannot run on the test machine. Compose's own ``config`` checks the file against the
Compose schema without an engine (``make compose-cli`` installs Debian's docker-compose); the
other tests read the files and check what would otherwise only fail at deploy time: a command line
``draftbench`` rejects, a missing GPU reservation, a compile cache thrown away with each container.
"""

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import click
import pytest
import typer
import yaml
from typer.testing import CliRunner

from app.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _options(argv: list[str]) -> list[str]:
    return [a for a in argv if a.startswith("--")]


def _help(command: str) -> str:
    """``draftbench COMMAND --help``, wide and without colours so no option name is cut or styled."""
    result = CliRunner().invoke(cli, [command, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    return ANSI.sub("", result.output)


def _parses(argv: list[str]) -> None:
    """Let click parse the argv as the container would pass it (types, choices, unknown options)."""
    program, name, *args = argv
    assert program == "draftbench"
    group = typer.main.get_command(cli)
    command = group.commands[name]  # type: ignore[attr-defined]
    with command.make_context(name, list(args), parent=click.Context(group)):
        pass


def _compose_cli() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True, check=False).returncode == 0:
        return ["docker", "compose"]
    pytest.fail("no Compose CLI: run `make compose-cli` (Debian's docker-compose) or install the docker compose plugin")


def _config(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*_compose_cli(), "-f", str(path), "config", "-q"], capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/bin:/bin:/usr/local/bin", "DRAFTBENCH_TOKEN": "t"}, cwd=ROOT)


def test_compose_accepts_the_file(tmp_path: Path) -> None:
    checked = _config(ROOT / "docker-compose.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # ...and is a real check: the same file with one key misspelt is refused.
    broken = tmp_path / "docker-compose.yml"
    broken.write_text((ROOT / "docker-compose.yml").read_text().replace("command:", "commmand:", 1))
    assert _config(broken).returncode != 0


def test_three_services_in_start_order(compose) -> None:
    services = compose["services"]
    assert set(services) == {"postgres", "api", "gpu-worker"}
    assert services["postgres"]["image"] == "postgres:16" and "healthcheck" in services["postgres"]
    assert services["api"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "api" in services["gpu-worker"]["depends_on"]
    assert any(v.endswith(":/var/lib/postgresql/data") for v in services["postgres"]["volumes"])


def test_api_talks_to_postgres_and_needs_a_token(compose) -> None:
    env = compose["services"]["api"]["environment"]
    assert env["DRAFTBENCH_DATABASE_URL"] == "postgresql+psycopg://draftbench:draftbench@postgres:5432/draftbench"
    # `:?` makes compose refuse to start without a token instead of serving anonymous writes.
    assert env["DRAFTBENCH_TOKEN"].startswith("${DRAFTBENCH_TOKEN:?")
    assert compose["services"]["gpu-worker"]["environment"]["DRAFTBENCH_TOKEN"].startswith("${DRAFTBENCH_TOKEN:?")


def test_worker_reserves_every_gpu(compose) -> None:
    [device] = compose["services"]["gpu-worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["count"] == "all" and device["capabilities"] == ["gpu"]


def test_worker_keeps_vllm_and_hf_caches_in_named_volumes(compose) -> None:
    mounts = dict(v.split(":", 1)[::-1] for v in compose["services"]["gpu-worker"]["volumes"])
    for target in ("/root/.cache/vllm", "/root/.cache/huggingface"):
        assert target in mounts, f"{target} is not mounted"
        assert mounts[target] in compose["volumes"], f"{mounts[target]} is not a named volume"


def test_services_build_the_dockerfile_targets(compose) -> None:
    stages = dict(re.findall(r"^FROM\s+(\S+)\s+AS\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.M | re.I))
    targets = {image: stage for stage, image in stages.items()}
    assert targets["api"] == "python:3.11-slim"
    assert targets["worker"] == "vllm/vllm-openai:${VLLM_VERSION}"
    assert compose["services"]["api"]["build"]["target"] == "api"
    assert compose["services"]["gpu-worker"]["build"]["target"] == "worker"


@pytest.mark.parametrize("service", ["api", "gpu-worker"])
def test_commands_are_ones_draftbench_accepts(compose, service: str) -> None:
    argv = compose["services"][service]["command"]
    assert argv[:2] == ["draftbench", {"api": "serve", "gpu-worker": "worker"}[service]]
    help_text = _help(argv[1])
    for option in _options(argv):
        assert option in help_text, f"`draftbench {argv[1]}` has no {option}"
    _parses(argv)


def test_worker_build_label_follows_the_vllm_version(compose) -> None:
    argv = compose["services"]["gpu-worker"]["command"]
    build = argv[argv.index("--build") + 1]
    assert build == "vllm-${VLLM_VERSION:-v0.26.0}=/usr/bin/python3"
    assert compose["services"]["gpu-worker"]["build"]["args"]["VLLM_VERSION"] == "${VLLM_VERSION:-v0.26.0}"
