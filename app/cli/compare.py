"""``draftbench compare BASE HEAD``: the pull-request comment ``draftbench ci`` would post for two stored sweeps.

Runs nothing and posts nothing: it reads the two sweeps (their commits, for the headline) and
``GET /api/v1/compare``, and prints the Markdown, so a maintainer can check a comment or re-render one
after the fact. ``--fail-on`` gives the exit code ``ci`` would give.
"""

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from app.ci import comment, gate
from app.cli.errors import CliError
from app.cli.http import Api
from app.cli.options import Server
from app.config import DEFAULT_SERVER
from app.schemas.compare import Comparison

# What ``ci`` exits with when the comparison fails ``--fail-on``.
EXIT_FAIL_ON = 3
# The headline's commit of a sweep submitted without one.
_NO_COMMIT = "unknown"


def compare(
    base: Annotated[str, typer.Argument(metavar="BASE", help="The base sweep's id", show_default=False)],
    head: Annotated[str, typer.Argument(metavar="HEAD", help="The head sweep's id", show_default=False)],
    server: Server = DEFAULT_SERVER,
    fail_on: Annotated[str, typer.Option(
        help="regression (cells worse, newly crashing, or falling back and slower), crash, any, or never")] = "regression",
    output: Annotated[Path | None, typer.Option(dir_okay=False, help="Write the Markdown here instead of stdout")] = None,
) -> None:
    """Render the pull-request comment of two stored sweeps (what `draftbench ci` posts), running nothing."""
    rule = fail_on_rule(fail_on)
    base_id, head_id = _sweep_id("BASE", base), _sweep_id("HEAD", head)
    with Api(server) as api:
        commits = {name: _commit(api, name, sweep_id) for name, sweep_id in (("BASE", base_id), ("HEAD", head_id))}
        comparison = fetch(api, base_id, head_id)
        markdown = comment.render(comparison, comment.Context(
            head_commit=commits["HEAD"], base_commit=commits["BASE"], server=api.server))
    if output is None:
        print(markdown)
    else:
        try:
            output.write_text(markdown)
        except OSError as exc:
            raise CliError(f"--output: cannot write {output}: {exc.strerror or exc}") from None
    failing = gate.failures(comparison, rule)
    if failing:
        raise CliError(f"the check fails (--fail-on {rule}: {', '.join(failing)})", EXIT_FAIL_ON)


def fetch(api: Api, base_sweep: int, head_sweep: int) -> Comparison:
    """``GET /api/v1/compare`` of two sweeps, read as the comment reads it."""
    return parse(api.get("/api/v1/compare", base_sweep=base_sweep, head_sweep=head_sweep), api.server)


def parse(answer: object, server: str) -> Comparison:
    """A comparison as the service at ``server`` answered it; CliError when this client cannot read it."""
    try:
        return Comparison.model_validate(answer)
    except ValidationError as exc:
        raise CliError(f"the service at {server} answered a comparison this client cannot read "
                       f"(is it another version?): {' '.join(str(exc).split())[:300]}") from None


def fail_on_rule(value: str) -> gate.FailOn:
    try:
        return gate.FailOn(value)
    except ValueError:
        raise CliError(f"--fail-on must be one of {', '.join(gate.FailOn)}; got {value!r}") from None


def _sweep_id(name: str, value: str) -> int:
    if not value.isdecimal() or int(value) > 2**62:
        raise CliError(f"{name} must be a sweep id (a whole number, `draftbench status` lists them), got {value!r}")
    return int(value)


def _commit(api: Api, name: str, sweep_id: int) -> str:
    try:
        sweep = api.get(f"/api/v1/sweeps/{sweep_id}")
    except CliError as exc:
        raise CliError(f"{name} (sweep {sweep_id}): {exc}", exc.code) from None
    return sweep.get("commit") or _NO_COMMIT


def register(cli: typer.Typer) -> None:
    cli.command()(compare)
