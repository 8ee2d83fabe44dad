"""``draftbench ci`` end to end: the real service on loopback, results reported through the worker protocol,
the GitHub-like server on loopback; the command runs as a process, as a CI job runs it."""

import math
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import yaml

from tests.ci.github_server import BOT, GitHubState
from tests.ci.github_server import TOKEN as GH_TOKEN
from tests.conftest import AUTH, TOKEN
from tests.factories import cell_result, sweep_body

ROOT = Path(__file__).resolve().parents[2]
BASE, HEAD = "main-0.32", "pr-12"
Speed = Callable[[str, str, int], float]  # (build, method, repeat) -> tokens/s


def slower_ngram(build: str, method: str, repeat: int) -> float:
    """The head's n-gram cell runs at 0.7x; its draft_model cell as fast as the base (interleaved values)."""
    if method == "ngram" and build == HEAD:
        return 0.7 * (100.0 + 2 * repeat)
    return same(build, method, repeat)


def same(build: str, method: str, repeat: int) -> float:
    return 100.0 + 2 * repeat + (build == HEAD)


@pytest.fixture
def sweep_file(tmp_path: Path, dataset: Path) -> Path:
    # Seven repeats a side: enough engine starts for Mann-Whitney at p < 0.002.
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep_body(dataset, name="pr-check", repeats=7)))
    return path


def ci(server: str, gh: GitHubState, sweep: Path, tmp_path: Path, speed: Speed, *, head: str = "abc1234",
       fail_on: str = "regression", gh_token: str | None = GH_TOKEN, extra: tuple[str, ...] = (),
       work_s: float = 0.0, claims: list[dict] | None = None, claim_after: int = 0) -> subprocess.CompletedProcess:
    """Run ``draftbench ci`` (``python -m app.cli ci``) while this test acts as the worker, reporting ``speed`` for each
    job it claims after ``work_s`` seconds, and keeping each claim in ``claims``; it claims nothing before the service
    holds ``claim_after`` sweeps."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DRAFTBENCH_", "GITHUB_"))}
    env |= {"GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")} | ({"GITHUB_TOKEN": gh_token} if gh_token else {})
    command = [sys.executable, "-m", "app.cli", "ci", "--server", server, "--token", TOKEN, "--repo", "octo/vllm",
               "--pr", "12", "--head", head, "--base", "def4567", "--build", HEAD, "--base-build", BASE,
               "--sweep", str(sweep), "--fail-on", fail_on, "--github-api", gh.url, "--poll", "0.2",
               "--comment-file", str(tmp_path / "draftbench-comment.md"), *extra]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    worker = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": BASE}, {"label": HEAD}]}
    registered = httpx.post(f"{server}/api/v1/workers", json=worker, headers=AUTH, timeout=30).json()
    own = {"Authorization": f"Bearer {registered['credential']}"}
    started: Counter = Counter()  # jobs reported per (build, method): each a repeat, an engine start
    deadline = time.monotonic() + 120
    while len(httpx.get(f"{server}/api/v1/sweeps", timeout=30).json()) < claim_after and process.poll() is None:
        time.sleep(0.05)
    while process.poll() is None and time.monotonic() < deadline:
        claimed = httpx.post(f"{server}/api/v1/workers/{registered['id']}/claim", headers=own, timeout=30)
        if claimed.status_code == 204:
            time.sleep(0.1)
            continue
        job = claimed.json()
        if claims is not None:
            claims.append(job)
        time.sleep(work_s)
        key = (job["spec"]["build"], job["spec"]["speculative"]["method"])
        result = cell_result(tokens_per_s=speed(*key, started[key]))
        started[key] += 1
        done = httpx.post(f"{server}/api/v1/jobs/{job['job_id']}/complete", json={"outcome": {"result": result}},
                          headers=own, timeout=30)
        assert done.status_code == 200, done.text
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def test_a_regression_is_flagged_on_its_cell_and_the_next_push_edits_the_comment(
        server: str, gh: GitHubState, sweep_file: Path, tmp_path: Path) -> None:
    done = ci(server, gh, sweep_file, tmp_path, slower_ngram)
    assert done.returncode == 3, done.stderr
    first_line = done.stdout.splitlines()[0]
    assert first_line.startswith("**draftbench: 1 regression** (head abc1234 vs base def4567, cpu, vLLM build pr-12")
    regressions = done.stdout.split("#### Regressions")[1].split("####")[0].split("<details>")[0]
    assert "- slower on CPU_ATTN with NONE (ngram k=3, cpu): 0.70x [" in regressions and "draft_model" not in regressions
    assert "| worse | cpu | ngram k=3 |" in done.stdout and "| unchanged | cpu | draft_model k=3 |" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "draftbench: the check fails (--fail-on regression: 1 worse)"
    [posted] = gh.comments[12]
    assert posted["body"] == (tmp_path / "draftbench-comment.md").read_text() == done.stdout.rstrip("\n") + "\n"
    assert (tmp_path / "summary.md").read_text().startswith(first_line)
    # `draftbench compare` of the two stored sweeps renders the same comment, running nothing.
    [ids] = re.findall(r"\(base sweep (\d+), head sweep (\d+)\)", done.stdout)
    again = subprocess.run([sys.executable, "-m", "app.cli", "compare", *ids, "--server", server], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert (again.returncode, again.stdout) == (3, done.stdout), again.stderr
    sweeps = httpx.get(f"{server}/api/v1/sweeps", timeout=30).json()
    assert sorted((s["build"], s["commit"], s["pull_request"]) for s in sweeps) == [
        (BASE, "def4567", None), (HEAD, "abc1234", 12)]

    # The next push: the base run is reused, the comment edited in place; a regression passes --fail-on crash.
    again = ci(server, gh, sweep_file, tmp_path, slower_ngram, head="bcd2345", fail_on="crash")
    assert again.returncode == 0, again.stderr
    assert "base: finished sweep" in again.stderr
    assert len(httpx.get(f"{server}/api/v1/sweeps", timeout=30).json()) == 3
    [edited] = gh.comments[12]
    assert edited["id"] == posted["id"] and "(head bcd2345 vs base def4567" in edited["body"]
    assert gh.calls.count(("POST", "/repos/octo/vllm/issues/12/comments")) == 1 and [m for m, _ in gh.calls].count("PATCH") == 1


def test_an_aa_pair_flags_nothing_even_with_fail_on_any(server: str, gh: GitHubState, sweep_file: Path, tmp_path: Path) -> None:
    done = ci(server, gh, sweep_file, tmp_path, same, fail_on="any")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("**draftbench: no regression** (head abc1234")
    assert "####" not in done.stdout and done.stdout.count("| unchanged |") == 2


@pytest.mark.parametrize(("refusal", "said"), [
    ((403, {}, "Resource not accessible by integration"), "(403: Resource not accessible by integration)"),
    ((404, {}, "Not Found"), "(404: Not Found)"),
    ((422, {}, "Validation Failed"), "(422: Validation Failed)"),
    ((429, {"retry-after": "60"}, "secondary rate limit"), "rate limit stopped commenting on #12 in octo/vllm (429); retry after 60 s"),
])
def test_a_refused_comment_keeps_the_comparison_and_says_what_failed(
        server: str, gh: GitHubState, sweep_file: Path, tmp_path: Path, refusal: tuple, said: str) -> None:
    gh.refuse["create"] = refusal
    done = ci(server, gh, sweep_file, tmp_path, slower_ngram)
    assert done.returncode == 3 | 4, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("draftbench: the check fails (--fail-on regression: 1 worse); the comment was not posted: GitHub")
    assert said in line and line.endswith(f"(it is in {tmp_path / 'draftbench-comment.md'} and the step summary)")
    for kept in (done.stdout, (tmp_path / "draftbench-comment.md").read_text(), (tmp_path / "summary.md").read_text()):
        assert kept.startswith("**draftbench: 1 regression**")
    assert gh.comments == {}


def test_someone_elses_comment_holding_the_marker_is_left_alone_and_ours_is_posted(
        server: str, gh: GitHubState, sweep_file: Path, tmp_path: Path) -> None:
    theirs = gh.add(12, "quoting draftbench: <!-- draftbench -->", author="mallory")
    done = ci(server, gh, sweep_file, tmp_path, same)
    assert done.returncode == 0, done.stderr
    assert theirs["body"] == "quoting draftbench: <!-- draftbench -->"
    [ours] = [c for c in gh.comments[12] if c["user"]["login"] == BOT]
    assert ours["body"].startswith("**draftbench: no regression**") and "PATCH" not in dict(gh.calls)


def test_comment_author_names_the_account_whose_comment_is_edited(
        server: str, gh: GitHubState, sweep_file: Path, tmp_path: Path) -> None:
    theirs = gh.add(12, "<!-- draftbench -->", author="mallory")
    ours = gh.add(12, "an old run\n<!-- draftbench -->", author="ci-bot[bot]", kind="Bot")
    done = ci(server, gh, sweep_file, tmp_path, same, extra=("--comment-author", "ci-bot[bot]"))
    assert done.returncode == 0, done.stderr
    assert ours["body"].startswith("**draftbench: no regression**") and theirs["body"] == "<!-- draftbench -->"
    assert [p for _, p in gh.calls if p in ("/user", "/graphql")] == []  # the account is given: GitHub is not asked


def test_the_github_token_shows_nowhere_in_what_is_printed_or_saved(
        server: str, gh: GitHubState, sweep_file: Path, tmp_path: Path) -> None:
    gh.refuse["create"] = (422, {}, f"Validation Failed (the request was authorised by {GH_TOKEN})")  # a server that echoes it
    done = ci(server, gh, sweep_file, tmp_path, same)
    assert done.returncode == 4, done.stderr
    assert "Validation Failed (the request was authorised by ***)" in done.stderr and GH_TOKEN not in done.stderr + done.stdout
    # A token the comparison happens to hold (here the base's build label) is scrubbed from the comment.
    (tmp_path / "again").mkdir()
    again = ci(server, gh, sweep_file, tmp_path / "again", same, gh_token=BASE)
    assert again.returncode == 4, again.stderr
    saved = [again.stdout, *((tmp_path / "again" / name).read_text() for name in ("draftbench-comment.md", "summary.md"))]
    assert all(BASE not in text and f"vLLM build {HEAD} (0.32.0) vs ***)" in text for text in saved)
    assert BASE not in again.stderr.strip().splitlines()[-1]


def test_ci_help_says_which_token_each_side_needs() -> None:
    done = subprocess.run([sys.executable, "-m", "app.cli", "ci", "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=os.environ | {"COLUMNS": "400"})
    assert "The service's token with the submit scope" in done.stdout and "worker" not in done.stdout
    assert "holding the GitHub token (pull-requests: write)" in done.stdout


def test_without_a_github_token_the_comment_is_saved_and_the_exit_says_so(
        server: str, gh: GitHubState, sweep_file: Path, tmp_path: Path) -> None:
    done = ci(server, gh, sweep_file, tmp_path, same, gh_token=None)
    assert done.returncode == 4, done.stderr
    assert "$GITHUB_TOKEN is not set" in done.stderr and (tmp_path / "draftbench-comment.md").is_file()


def test_bad_options_are_one_line_naming_the_option_and_its_values(sweep_file: Path) -> None:
    base = [sys.executable, "-m", "app.cli", "ci", "--server", "http://127.0.0.1:9", "--token", "t", "--pr", "1",
            "--head", "a", "--base", "b", "--build", "x", "--base-build", "y", "--sweep", str(sweep_file)]
    for extra, said in ((["--repo", "o/r", "--fail-on", "sometimes"],
                         "--fail-on must be one of regression, crash, any, never; got 'sometimes'"),
                        (["--repo", "not a repo"], "--repo must be OWNER/NAME"),
                        (["--repo", "o/r", "--mde", "5%"], "--mde needs --budget-gpu-minutes"),
                        (["--repo", "o/r", "--mde", "150%", "--budget-gpu-minutes", "5"], "--mde must be a relative change"),
                        (["--repo", "o/r", "--mde", "five", "--budget-gpu-minutes", "5"], "got 'five'"),
                        (["--repo", "o/r", "--budget-gpu-minutes", "0"], "--budget-gpu-minutes must be a number of minutes above 0"),
                        (["--repo", "o/r", "--budget-gpu-minutes", "nan"], "--budget-gpu-minutes must be")):
        done = subprocess.run(base + extra, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 1 and done.stderr.startswith("draftbench: ") and said in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def _noisy(change: float, spread: float) -> Speed:
    """Tokens/s whose engine starts spread by about ``spread`` (a fixed sequence, the same every run); the head's
    n-gram cell at ``change`` x the base."""
    def speed(build: str, method: str, repeat: int) -> float:
        luck = spread * math.sin(1.7 * repeat + (method == "ngram") + 0.5 * (build == HEAD))
        return 100.0 * (change if (method, build) == ("ngram", HEAD) else 1.0) * math.exp(luck)
    return speed


def _jobs(server: str, sweep_id: int) -> list[dict]:
    return httpx.get(f"{server}/api/v1/sweeps/{sweep_id}", timeout=30).json()["jobs"]


def _two_repeats(tmp_path: Path, dataset: Path) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep_body(dataset, name="pr-check", repeats=2)))
    return path


def test_base_and_head_run_paired_back_to_back_and_a_reused_base_runs_unpaired(
        server: str, gh: GitHubState, sweep_file: Path, tmp_path: Path) -> None:
    claims: list[dict] = []
    # Claims wait for the head: a job a worker claims between the two submissions runs alone (the head warns).
    done = ci(server, gh, sweep_file, tmp_path, same, claims=claims, claim_after=2)
    assert done.returncode == 0, done.stderr
    [base, head] = sorted(httpx.get(f"{server}/api/v1/sweeps", timeout=30).json(), key=lambda s: s["id"])
    assert httpx.get(f"{server}/api/v1/sweeps/{head['id']}", timeout=30).json()["paired_with"] == base["id"]
    pair_of = {job["job_id"]: job["pair_id"] for sweep in (base, head) for job in _jobs(server, sweep["id"])}
    ran = [pair_of[claim["job_id"]] for claim in claims]
    assert len(ran) == 28 and None not in ran and all(ran[i] == ran[i + 1] for i in range(0, 28, 2))
    rerun = ci(server, gh, sweep_file, tmp_path, same)  # the same job again: both sweeps are the first run's
    assert rerun.returncode == 0 and f"sweep {head['id']}, paired with it before" in rerun.stderr, rerun.stderr
    assert len(httpx.get(f"{server}/api/v1/sweeps", timeout=30).json()) == 2
    again = ci(server, gh, sweep_file, tmp_path, same, head="bcd2345")
    assert again.returncode == 0, again.stderr
    assert "base: a finished sweep cannot be paired: the head's starts run unpaired" in again.stderr
    newest = max(httpx.get(f"{server}/api/v1/sweeps", timeout=30).json(), key=lambda s: s["id"])
    assert {job["pair_id"] for job in _jobs(server, newest["id"])} == {None}


def test_more_pairs_go_to_the_open_cells_until_each_is_decided(
        server: str, gh: GitHubState, dataset: Path, tmp_path: Path) -> None:
    done = ci(server, gh, _two_repeats(tmp_path, dataset), tmp_path, _noisy(0.7, 0.08),
              extra=("--mde", "10%", "--budget-gpu-minutes", "10"), claim_after=2)
    assert done.returncode in (0, 3), done.stderr  # 3 once the slower n-gram cell has the repeats to be called worse
    [base, head] = sorted(httpx.get(f"{server}/api/v1/sweeps", timeout=30).json(), key=lambda s: s["id"])
    ran = {side["id"]: Counter(job["method"] for job in _jobs(server, side["id"]) if job["state"] == "succeeded")
           for side in (base, head)}
    # More starts came in pairs, to both sweeps alike, and only after the first pass's two a cell.
    assert ran[base["id"]] == ran[head["id"]] and min(ran[head["id"]].values()) >= 2 < max(ran[head["id"]].values())
    looks = [line for line in done.stderr.splitlines() if line.startswith("look ")]
    assert len(looks) >= 2 and ": 0 cell(s) open" in looks[-1] and looks[-1].endswith("every cell is decided")
    assert "Still open after more starts" not in done.stdout
    used = re.search(r"More starts: used ([\d.]+) of 10 GPU minutes in (\d+) looks; every cell is decided\.", done.stdout)
    assert used and int(used[2]) == len(looks), done.stdout
    seconds = sum(httpx.get(f"{server}/api/v1/sweeps/{s['id']}", timeout=30).json()["gpu_seconds"] for s in (base, head))
    assert float(used[1]) == round(seconds / 60, 1)


def test_the_budget_stops_the_looks_and_the_comment_names_each_cell_left_open(
        server: str, gh: GitHubState, dataset: Path, tmp_path: Path) -> None:
    done = ci(server, gh, _two_repeats(tmp_path, dataset), tmp_path, _noisy(1.0, 0.03),
              extra=("--mde", "1%", "--budget-gpu-minutes", "0.2"), work_s=0.3, claim_after=2)
    assert done.returncode == 0, done.stderr
    looks = [line for line in done.stderr.splitlines() if line.startswith("look ")]
    assert len(looks) >= 2 and "the budget ran out" in looks[-1] and "more pairs asked" in looks[0]
    left = done.stdout.split("#### Still open after more starts")[1].split("More starts:")[0]
    for label in ("ngram k=3", "draft_model k=3"):
        [line] = [line for line in left.splitlines() if f"({label}, cpu)" in line]
        assert re.search(r": (unchanged|undecided), [\d.]+x .* after \d+ pairs, .*: the budget ran out", line), line
    assert re.search(rf"More starts: used [\d.]+ of 0\.2 GPU minutes in {len(looks)} looks; the budget ran out", done.stdout)
    [base, head] = sorted(httpx.get(f"{server}/api/v1/sweeps", timeout=30).json(), key=lambda s: s["id"])
    spent = sum(httpx.get(f"{server}/api/v1/sweeps/{s['id']}", timeout=30).json()["gpu_seconds"] for s in (base, head))
    assert spent >= 0.2 * 60 or "fits not one more pair" in looks[-1]
