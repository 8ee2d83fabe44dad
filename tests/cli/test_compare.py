"""``draftbench compare BASE HEAD``: the comment of two stored sweeps, rendered without running anything."""

from collections import Counter

import httpx
import pytest

from tests.cli.test_errors import one_line, run
from tests.conftest import AUTH
from tests.factories import cell_result, sweep_body

BASE, HEAD = "main-0.32", "pr-12"


def _store(server: str, dataset, build: str, commit: str, ngram_speed: float) -> int:
    """A finished sweep of ``build`` at ``commit``: seven repeats of an n-gram and a draft-model cell, the n-gram
    one at ``ngram_speed`` times the draft model's tokens/s."""
    worker = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": build}]}
    registered = httpx.post(f"{server}/api/v1/workers", json=worker, headers=AUTH, timeout=30).json()
    own = {"Authorization": f"Bearer {registered['credential']}"}
    body = sweep_body(dataset, build=build, commit=commit, repeats=7)
    sweep = httpx.post(f"{server}/api/v1/sweeps", json=body, headers=AUTH, timeout=30).json()
    started: Counter = Counter()  # repeats reported per method
    for _ in range(sweep["total"]):
        job = httpx.post(f"{server}/api/v1/workers/{registered['id']}/claim", headers=own, timeout=30).json()
        method = job["spec"]["speculative"]["method"]
        speed = (100.0 + 2 * started[method]) * (ngram_speed if method == "ngram" else 1.0)
        started[method] += 1
        done = httpx.post(f"{server}/api/v1/jobs/{job['job_id']}/complete",
                          json={"outcome": {"result": cell_result(tokens_per_s=speed)}}, headers=own, timeout=30)
        assert done.status_code == 200, done.text
    return sweep["id"]


@pytest.fixture
def sweeps(server: str, dataset) -> tuple[int, int, int]:
    """The base, a head whose n-gram cell runs at 0.7x, and a head as fast as the base."""
    return (_store(server, dataset, BASE, "def4567", 1.0), _store(server, dataset, HEAD, "abc1234", 0.7),
            _store(server, dataset, HEAD, "fff0000", 1.0))


def test_a_regression_renders_ci_s_comment_and_fails_the_gate(server: str, sweeps: tuple[int, int, int]) -> None:
    base, slow, _ = sweeps
    done = run("compare", str(base), str(slow), "--server", server)
    assert done.returncode == 3, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("**draftbench: 1 regression** (head abc1234 vs base def4567, cpu, vLLM build pr-12")
    regressions = done.stdout.split("#### Regressions")[1].split("####")[0].split("<details>")[0]
    assert "- slower on CPU_ATTN with NONE (ngram k=3, cpu): 0.70x [" in regressions and "draft_model" not in regressions
    assert f"(base sweep {base}, head sweep {slow})" in done.stdout
    assert done.stderr.strip() == "draftbench: the check fails (--fail-on regression: 1 worse)"
    assert run("compare", str(base), str(slow), "--server", server, "--fail-on", "never").returncode == 0


def test_an_unchanged_head_says_no_regression_into_the_output_file(server: str, sweeps: tuple[int, int, int], tmp_path) -> None:
    base, _, same = sweeps
    out = tmp_path / "comment.md"
    done = run("compare", str(base), str(same), "--server", server, "--fail-on", "any", "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert out.read_text().startswith("**draftbench: no regression** (head fff0000 vs base def4567")
    assert "####" not in out.read_text() and out.read_text().count("| unchanged |") == 2


@pytest.mark.parametrize(("args", "said"), [
    (("x1", "2"), "draftbench: BASE must be a sweep id (a whole number, `draftbench status` lists them), got 'x1'"),
    (("1", "2.5"), "draftbench: HEAD must be a sweep id"),
    (("99", "1"), "draftbench: BASE (sweep 99): GET /api/v1/sweeps/99 refused (404)"),
    (("1", "2", "--fail-on", "worse"), "draftbench: --fail-on must be one of regression, crash, any, never; got 'worse'"),
])
def test_bad_input_is_one_line_naming_the_field(server: str, args: tuple, said: str) -> None:
    assert one_line(run("compare", *args, "--server", server)).startswith(said)
