"""``draftbench ci``: a pull request's build against its base build, as one comment on the pull request.

Submits the head sweep and, unless a finished one of the same matrix exists, the base sweep; waits; reads
``GET /api/v1/compare``; prints the comment, appends it to ``$GITHUB_STEP_SUMMARY`` and saves it before
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
from app.cli import compare
from app.cli.errors import CliError, redact
from app.cli.http import Api
from app.cli.options import Server, SubmitToken
from app.cli.sweeps import follow
from app.config import DEFAULT_SERVER

# Exit codes, bits that add up: the check failed by --fail-on (3), the comment was not posted (4), both (7).
# 1 is any other failure (the service, the sweep file), before there is anything to compare.
EXIT_FAIL_ON = compare.EXIT_FAIL_ON
EXIT_NOT_POSTED = 4
# Spec fields that say who and why, not what runs: a base run matches whatever they are.
_WHO = ("name", "build", "pull_request", "branch", "commit", "tags", "submitted_by", "reason", "priority")
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
    fail_on: Annotated[str, typer.Option(help="regression (worse or newly crashing cells), crash, any, or never")] = "regression",
    github_api: Annotated[str, typer.Option(help="GitHub's REST API")] = API_URL,
    github_token_env: Annotated[
        str, typer.Option(help="The environment variable holding the GitHub token (pull-requests: write)")
    ] = "GITHUB_TOKEN",
    comment_author: Annotated[str | None, typer.Option(
        help="The login whose comment is edited (as github-actions\\[bot]); default: the GitHub token's account, asked of GitHub")] = None,
    comment_file: Annotated[Path, typer.Option(help="Where the comment's Markdown is saved")] = Path("draftbench-comment.md"),
    poll: Annotated[float, typer.Option(help="Seconds between progress reads")] = 5.0,
) -> None:
    """Benchmark a pull request's build against its base build and comment the comparison on the pull request."""
    rule = compare.fail_on_rule(fail_on)
    if not _REPO.fullmatch(repo):
        raise CliError(f"--repo must be OWNER/NAME (letters, digits, '.', '_', '-'), got {repo!r}")
    spec = read_sweep(sweep)
    digest = hashlib.sha256(sweep.read_bytes()).hexdigest()[:16]
    github_token = os.environ.get(github_token_env, "").strip()
    with Api(server, token) as api:
        head_sweep = _submit(api, spec | {"build": build, "commit": head, "pull_request": pr},
                             key=f"draftbench-ci:{repo}#{pr}:{head}:{build}:{digest}")
        base_id = _finished_base(api, head_sweep["spec"], build=base_build, commit=base)
        if base_id is None:
            base_spec = {k: v for k, v in spec.items() if k != "pull_request"} | {"build": base_build, "commit": base}
            base_id = _submit(api, base_spec, key=f"draftbench-ci:{repo}:{base}:{base_build}:{digest}")["id"]
        else:
            print(f"base: finished sweep {base_id} of build {base_build} at {base[:12]} has the same matrix", file=sys.stderr)
        for sweep_id in (base_id, head_sweep["id"]):
            follow(api, sweep_id, api.get(f"/api/v1/sweeps/{sweep_id}")["total"], poll, out=_progress)
        comparison = compare.fetch(api, base_id, head_sweep["id"])
        markdown = comment.render(comparison, comment.Context(head_commit=head, base_commit=base, server=api.server))
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
    from app.sweeps import parsing

    try:
        spec = parsing.load(path.read_bytes(), parsing.YAML_TYPES[0])
    except ValueError as exc:
        raise CliError(f"{path}: {' '.join(str(exc).split())[:500]}") from None
    if not isinstance(spec, dict):
        raise CliError(f"{path}: a sweep is a mapping of fields, got {type(spec).__name__}")
    return spec


def _submit(api: Api, spec: dict[str, Any], *, key: str) -> dict[str, Any]:
    """Submit once: the same key and sweep again (a re-run job) is the first sweep."""
    sweep = api.send("POST", "/api/v1/sweeps", json=spec, headers={"Idempotency-Key": key}).json()
    print(f"{spec['build']}: sweep {sweep['id']} ({sweep['total']} jobs) {api.server}/sweeps/{sweep['id']}", file=sys.stderr)
    for warning in sweep.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    return sweep


def _finished_base(api: Api, head_spec: dict[str, Any], *, build: str, commit: str) -> int | None:
    """The newest finished sweep of ``build`` at ``commit`` whose matrix (the spec but for who and why) is the head's,
    among the 500 newest sweeps."""
    wanted = {k: v for k, v in head_spec.items() if k not in _WHO}
    for summary in api.get("/api/v1/sweeps", limit=500):
        if (summary["build"], summary["commit"], summary["state"]) != (build, commit, _FINISHED):
            continue
        spec = api.get(f"/api/v1/sweeps/{summary['id']}")["spec"]
        if {k: v for k, v in spec.items() if k not in _WHO} == wanted:
            return summary["id"]
    return None


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
