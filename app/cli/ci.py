"""``draftbench ci``: a pull request's build against its base build, as one comment on the pull request.

Submits the base sweep and the head sweep paired with it (each cell's base and head starts back to back on one
worker), unless a finished base of the same matrix exists, which is reused and cannot be paired; waits; reads
``GET /api/v1/compare`` (with ``--budget-gpu-minutes``, look after look with more pairs where cells are still
open: app.cli.looks); prints the comment, appends it to ``$GITHUB_STEP_SUMMARY`` and saves it before
posting it, so a refusal from GitHub never loses the comparison. The exit code says what failed. Neither token
ever shows in what it prints or saves, nor a password in the service's address.
"""

import hashlib
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from app.ci import comment, gate
from app.ci.github import API_URL, GitHub, GitHubError
from app.cli import compare, looks
from app.cli.errors import CliError, redact
from app.cli.http import Api
from app.cli.options import Server, SubmitToken
from app.cli.sweeps import follow
from app.config import DEFAULT_SERVER
from app.schemas.sweep import matrix_of

# Exit codes, bits that add up: the check failed by --fail-on (3), the comment was not posted (4), both (7).
# 1 is any other failure (the service, the sweep file), before there is anything to compare.
EXIT_FAIL_ON = compare.EXIT_FAIL_ON
EXIT_NOT_POSTED = 4
_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_FINISHED = "finished"
# Progress goes to stderr: stdout is the comment's Markdown alone.
_progress = Console(stderr=True)


def ci(
    sweep: Annotated[Path, typer.Option(exists=True, dir_okay=False, help="The sweep both builds run (YAML or JSON)")],
    repo: Annotated[str, typer.Option(help="OWNER/NAME of the GitHub repository")],
    pr: Annotated[int, typer.Option(min=1, help="The pull request's number")],
    head: Annotated[str, typer.Option(help="The head commit (the pull request's)")],
    base: Annotated[str, typer.Option(help="The base commit")],
    build: Annotated[str, typer.Option(help="Build label of the head (a registered build)")],
    base_build: Annotated[str, typer.Option(help="Build label of the base")],
    server: Server = DEFAULT_SERVER,
    token: SubmitToken = "",
    fail_on: Annotated[str, typer.Option(
        help="regression (cells worse, newly crashing, or falling back and slower), crash, any, or never")] = "regression",
    github_api: Annotated[str, typer.Option(help="GitHub's REST API")] = API_URL,
    github_token_env: Annotated[
        str, typer.Option(help="The environment variable holding the GitHub token (pull-requests: write)")
    ] = "GITHUB_TOKEN",
    comment_author: Annotated[str | None, typer.Option(
        help="The login whose comment is edited (as github-actions\\[bot]); default: the GitHub token's account, asked of GitHub")] = None,
    comment_file: Annotated[Path, typer.Option(help="Where the comment's Markdown is saved")] = Path("draftbench-comment.md"),
    poll: Annotated[float, typer.Option(help="Seconds between progress reads")] = 5.0,
    mde: Annotated[str | None, typer.Option(
        help="With --budget-gpu-minutes: an unchanged cell is decided once its starts would find a change this small "
             "(5% or 0.05)")] = None,
    budget_gpu_minutes: Annotated[float | None, typer.Option(
        help="After the first pass, more paired starts for the cells still undecided, until decided or both sweeps "
        "have used this many GPU minutes (a CPU-engine cell counts as one device)")] = None,
) -> None:
    """Benchmark a pull request's build against its base build and comment the comparison on the pull request."""
    rule = compare.fail_on_rule(fail_on)
    if not _REPO.fullmatch(repo):
        raise CliError(f"--repo must be OWNER/NAME (letters, digits, '.', '_', '-'), got {repo!r}")
    target = _mde(mde)
    if budget_gpu_minutes is not None and not 0 < budget_gpu_minutes < float("inf"):
        raise CliError(f"--budget-gpu-minutes must be a number of minutes above 0, got {budget_gpu_minutes:g}")
    if target is not None and budget_gpu_minutes is None:
        raise CliError("--mde needs --budget-gpu-minutes: more starts are what shrinks the change a cell can show")
    spec = read_sweep(sweep)
    digest = hashlib.sha256(sweep.read_bytes()).hexdigest()[:16]
    github_token = os.environ.get(github_token_env, "").strip()
    head_spec = spec | {"build": build, "commit": head, "pull_request": pr}
    head_key = f"draftbench-ci:{repo}#{pr}:{head}:{build}:{digest}"
    with Api(server, token) as api:
        # More starts come in pairs: with a budget the base runs beside the head, never a finished one reused.
        found = None if budget_gpu_minutes else _finished_base(api, head_spec, build=base_build, commit=base)
        if found is None:
            base_spec = {k: v for k, v in spec.items() if k != "pull_request"} | {"build": base_build, "commit": base}
            base_id = submit(api, base_spec, key=f"{head_key}:base:{base}:{base_build}")["id"]
            head_sweep = paired_head(api, head_spec, base_id, key=head_key)
        else:
            base_id = found
            print(f"base: finished sweep {base_id} of build {base_build} at {base[:12]} has the same matrix", file=sys.stderr)
            head_sweep = _own_head(api, base_id, head_spec)
            if head_sweep is None:
                print("base: a finished sweep cannot be paired: the head's starts run unpaired", file=sys.stderr)
                head_sweep = submit(api, head_spec, key=head_key)
        for sweep_id in (base_id, head_sweep["id"]):
            follow(api, sweep_id, api.get(f"/api/v1/sweeps/{sweep_id}")["total"], poll, out=_progress)
        spent = None
        if budget_gpu_minutes:
            comparison, spent = looks.run(api, base_id, head_sweep["id"], budget_s=60 * budget_gpu_minutes, mde=target,
                                          poll=poll, out=_progress)
        else:
            comparison = compare.fetch(api, base_id, head_sweep["id"])
        markdown = comment.render(comparison, comment.Context(head_commit=head, base_commit=base, server=api.server,
                                                              looks=spent))
    # The comment goes to a public page: no token in it, whatever a worker reported.
    markdown = redact(markdown, *(t for secret in (github_token, token) for t in (secret, comment.escape(secret))))
    print(markdown)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    try:
        comment_file.write_text(markdown)
        if summary:
            with open(summary, "a") as out:
                out.write(markdown + "\n")
    except OSError as exc:
        raise CliError(f"cannot save the comment (it is printed above): {exc}") from None
    problems, code = [], 0
    failing = gate.failures(comparison, rule)
    if failing:
        problems.append(f"the check fails (--fail-on {rule}: {', '.join(failing)})")
        code |= EXIT_FAIL_ON
    not_posted = _post(repo, pr, markdown, api_url=github_api, token=github_token, token_env=github_token_env,
                       author=comment_author)
    if not_posted:
        problems.append(f"the comment was not posted: {not_posted} (it is in {comment_file}"
                        + (" and the step summary)" if summary else ")"))
        code |= EXIT_NOT_POSTED
    if problems:
        raise CliError("; ".join(problems), code)


def read_sweep(path: Path) -> dict[str, Any]:
    """The sweep file as a mapping (the service validates it): CliError when it is not YAML or JSON of one."""
    from app import files
    from app.sweeps import parsing

    try:
        spec = parsing.load(files.read_named(path, limit=files.body_limit()).data, parsing.YAML_TYPES[0])
    except files.FileRefused as exc:
        raise CliError(str(exc)) from None
    except ValueError as exc:
        raise CliError(f"{path}: {' '.join(str(exc).split())[:500]}") from None
    if not isinstance(spec, dict):
        raise CliError(f"{path}: a sweep is a mapping of fields, got {type(spec).__name__}")
    return spec


def paired_head(api: Api, head_spec: dict[str, Any], base_id: int, *, key: str) -> dict[str, Any]:
    """The head paired with its base; unpaired when workers took every base job between the two submissions (the
    service pairs only with queued jobs), as with a finished base. Another refusal stands. ``draftbench bisect``
    pairs its bad build with its good one through it."""
    try:
        return submit(api, head_spec | {"paired_with": base_id}, key=key)
    except CliError:
        if api.get(f"/api/v1/sweeps/{base_id}")["counts"].get("queued", 0):
            raise
    print(f"{head_spec['build']}: workers took every job of sweep {base_id} before this one was submitted: its starts run "
          "unpaired", file=sys.stderr)
    return submit(api, head_spec, key=f"{key}:unpaired")


def submit(api: Api, spec: dict[str, Any], *, key: str) -> dict[str, Any]:
    """Submit once: the same key and sweep again (a re-run job) is the first sweep."""
    sweep = api.send("POST", "/api/v1/sweeps", json=spec, headers={"Idempotency-Key": key}).json()
    print(f"{spec['build']}: sweep {sweep['id']} ({sweep['total']} jobs) {api.server}/sweeps/{sweep['id']}", file=sys.stderr)
    for warning in sweep.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    return sweep


def _mde(value: str | None) -> float | None:
    """``5%`` or ``0.05`` as 0.05; CliError unless strictly between 0 and 1."""
    if value is None:
        return None
    text = value.strip()
    try:
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        number = float("nan")
    if not 0 < number < 1:
        raise CliError(f"--mde must be a relative change such as 5% or 0.05 (above 0, below 100 %), got {value!r}")
    return number


def _matrix(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The spec's matrix as the service stores it (validated, defaults filled); None when it does not validate (the
    service then says why, naming the field)."""
    from pydantic import ValidationError

    from app.schemas.sweep import SweepSpec

    try:
        return matrix_of(SweepSpec.model_validate(spec).model_dump(mode="json"))
    except ValidationError:
        return None


def _finished_base(api: Api, head_spec: dict[str, Any], *, build: str, commit: str) -> int | None:
    """The newest finished sweep of ``build`` at ``commit`` whose matrix (the spec but for who and why,
    ``app.schemas.sweep.NOT_MATRIX``) is the head's, among the 500 newest sweeps."""
    wanted = _matrix(head_spec)
    if wanted is None:
        return None
    for summary in api.get("/api/v1/sweeps", limit=500):
        if (summary["build"], summary["commit"], summary["state"]) != (build, commit, _FINISHED):
            continue
        if matrix_of(api.get(f"/api/v1/sweeps/{summary['id']}")["spec"]) == wanted:
            return summary["id"]
    return None


def _own_head(api: Api, base_id: int, head_spec: dict[str, Any]) -> dict[str, Any] | None:
    """The sweep paired with the finished base ``base_id`` when it is this head's (a re-run of this job paired them:
    the same build, commit, pull request and matrix), else None."""
    partner = api.get(f"/api/v1/sweeps/{base_id}").get("paired_with")
    if partner is None:
        return None
    sweep = api.get(f"/api/v1/sweeps/{partner}")
    ours = (head_spec["build"], head_spec["commit"], head_spec["pull_request"], _matrix(head_spec))
    if (sweep["build"], sweep["commit"], sweep["pull_request"], matrix_of(sweep["spec"])) != ours:
        return None
    print(f"{sweep['build']}: sweep {sweep['id']}, paired with it before, {api.server}/sweeps/{sweep['id']}", file=sys.stderr)
    return sweep


def _post(repo: str, pr: int, markdown: str, *, api_url: str, token: str, token_env: str, author: str | None) -> str | None:
    """Create or update the pull request's comment (``author``'s, by default the token's account's); why it
    failed, or None."""
    if not token:
        return f"${token_env} is not set (--github-token-env names the variable holding the token)"
    try:
        with GitHub(token=token, repo=repo, api_url=api_url) as github:
            posted = github.upsert_comment(pr, markdown, marker=comment.MARKER, author=author)
    except GitHubError as exc:
        return redact(str(exc), token)
    print(redact(f"comment {posted.action}: {posted.url}", token), file=sys.stderr)
    return None


def register(cli: typer.Typer) -> None:
    cli.command()(ci)
