"""The example GitHub Actions workflow is YAML that calls ``draftbench ci`` with options the command has."""

import re
from pathlib import Path

import typer.main
import yaml

from app.cli.main import cli

WORKFLOW = Path(__file__).resolve().parents[2] / "examples" / "github-actions" / "draftbench.yml"


def test_the_example_workflow_runs_draftbench_ci_with_every_required_option() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert workflow["permissions"]["pull-requests"] == "write"
    [command] = [step["run"] for job in workflow["jobs"].values() for step in job["steps"]
                 if "draftbench ci" in step.get("run", "")]
    ci = typer.main.get_command(cli).commands["ci"]  # type: ignore[attr-defined]
    known = {opt for param in ci.params for opt in param.opts}
    required = {param.opts[0] for param in ci.params if param.required}
    used = set(re.findall(r"--[a-z-]+", command))
    assert used <= known and required <= used, (used - known, required - used)
