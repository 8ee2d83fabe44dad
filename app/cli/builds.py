"""``draftbench build create``: a build of a pull request, from a patch, a wheel or a pip requirement."""

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from app.cli.errors import CliError
from app.schemas import times

build_cli = typer.Typer(help="Make vLLM builds of pull requests for a worker to run.", no_args_is_help=True)
Root = Annotated[Path | None, typer.Option(envvar="DRAFTBENCH_BUILDS", help="Where builds are made (default ~/.cache/draftbench/builds)")]


@build_cli.command("create")
def create(
    label: Annotated[str, typer.Argument(help="The new build's label, as sweeps name it")],
    base: Annotated[str, typer.Option("--from", help="The base build: a label made here, or a Python interpreter")],
    patch: Annotated[Path | None, typer.Option(help="A unified diff (git diff) to vLLM's Python")] = None,
    wheel: Annotated[str | None, typer.Option(help="A vLLM wheel's path or URL (changes to compiled code)")] = None,
    pip: Annotated[str | None, typer.Option(help="A pip requirement for vLLM, e.g. 'vllm==0.33.0'")] = None,
    commit: Annotated[str | None, typer.Option(help="The commit the build stands for (recorded)")] = None,
    commit_date: Annotated[
        str | None, typer.Option(help="When that commit was made, ISO 8601 with a zone (a cell's history runs in commit order)")
    ] = None,
    root: Root = None,
) -> None:
    """Make a build beside its base and print the --build argument a worker takes for it.

    Give exactly one of --patch, --wheel or --pip. A patch shares the base's files (hard links) and its
    compiled extensions, so it may not touch compiled sources (csrc/, .cu, .cpp, ...): build a wheel.
    """
    from app.builds import diffs, patched, wheels
    from app.builds.facts import DEFAULT_ROOT, WRAPPER, BuildError
    from app.enums import BuildKind

    given = {name: value for name, value in (("--patch", patch), ("--wheel", wheel), ("--pip", pip)) if value}
    if len(given) != 1:
        raise CliError(f"give exactly one of --patch, --wheel or --pip (got {', '.join(given) or 'none'})")
    # The label becomes a folder name and a registered label: the worker's rule applies here too.
    if not _valid_label(label):
        raise CliError(f"label {label!r}: use letters, digits and . _ + - only")
    committed_at = _commit_date(commit_date) if commit_date else None
    where = (root or DEFAULT_ROOT).expanduser()
    try:
        if patch is not None:
            facts = patched.create(label=label, base=base, patch=patch, root=where, commit=commit, committed_at=committed_at)
        else:
            kind = BuildKind.WHEEL if wheel else BuildKind.PIP
            facts = wheels.create(label=label, base=base, requirement=wheel or pip, kind=kind, root=where, commit=commit,
                                  committed_at=committed_at)
    except (BuildError, diffs.DiffError) as exc:
        raise CliError(str(exc)) from None
    detail = f"patch {facts.patch_sha256[:12]} ({', '.join(facts.patch_files)})" if facts.patch_sha256 else facts.source
    print(f"build {label}: vLLM {facts.vllm_version} from {base} + {detail}")
    print(f"--build={label}={where / label / WRAPPER}")


def _commit_date(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"--commit-date {text!r}: not an ISO 8601 date and time (e.g. 2026-11-30T12:00:00+00:00)") from None
    if when.tzinfo is None:
        raise CliError(f"--commit-date {text!r}: give its zone (e.g. +00:00 or Z)")
    try:
        return times.plausible(when)
    except ValueError as exc:
        raise CliError(f"--commit-date {text!r}: {exc}") from None


def _valid_label(label: str) -> bool:
    from pydantic import ValidationError

    from app.schemas.worker import BuildInfo

    try:
        BuildInfo(label=label)
    except ValidationError:
        return False
    return True


def register(cli: typer.Typer) -> None:
    cli.add_typer(build_cli, name="build")
