"""``draftbench ci`` on real vLLM (the CPU build): pull-request builds made from the example patches, a real
worker running each cell in its own vLLM process, the real service, and the GitHub-like server on loopback.

The slowed build and the lower-acceptance build are each flagged on their cell with the right sign, the
unpatched build against itself flags nothing, and a nightly-style series of builds (commit dates given)
opens an alert at the first slowed build.
"""

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from app.builds import patched
from app.config import Settings
from runners.client import ServiceClient
from runners.worker import Build, Worker
from tests.ci.conftest import gh  # noqa: F401
from tests.ci.github_server import TOKEN as GH_TOKEN
from tests.ci.github_server import GitHubState
from tests.conftest import AUTH, TOKEN
from tests.live import beside_worker, serve
from tests.vllm_fixtures import CPU_ENGINE_ARGS

pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parents[2]
PATCHES = ROOT / "examples" / "patches"
BASE_SHA = "base000"
# The nightly series, in commit order: three unpatched builds, then two with the slow-drafting patch. Identical
# builds read far apart on a busy 2-core CI host (898 against 1296 tok/s in one run, 1326 against 866 in
# another): the alerts fit tokens/s on its logarithm, where that spread stays small beside a 6x drop.
SERIES = {"nightly-1": "2026-11-01T03:00:00Z", "nightly-2": "2026-11-02T03:00:00Z", "nightly-3": "2026-11-03T03:00:00Z",
          "nightly-4": "2026-11-04T03:00:00Z", "nightly-5": "2026-11-05T03:00:00Z"}
PATCHED = {"nightly-4": "ngram-slow-drafting", "nightly-5": "ngram-slow-drafting", "pr-corrupt": "ngram-corrupt-drafts"}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, vllm_python: Path) -> Iterator[tuple[str, Worker]]:
    """The service, and a worker holding the unpatched build under two labels and the patched ones."""
    root = tmp_path_factory.mktemp("pr-builds")
    builds = [Build(label, vllm_python) for label in ("nightly-1", "nightly-2", "nightly-3")]
    for label, patch in PATCHED.items():
        patched.create(label=label, base=str(vllm_python), patch=PATCHES / f"{patch}.diff", root=root)
        builds.append(Build(label, root / label / "python"))
    url = f"sqlite:///{tmp_path_factory.mktemp('ci-e2e') / 'draftbench.db'}"
    with serve(Settings(database_url=url, token=TOKEN)) as base:
        # The series' commit dates, as a worker reports a build's facts.
        facts = {"name": "dates", "host": "h", "gpu_kinds": ["cpu"],
                 "builds": [{"label": label, "committed_at": when} for label, when in SERIES.items()]}
        assert httpx.post(f"{base}/api/v1/workers", json=facts, headers=AUTH, timeout=30).status_code == 201
        client = ServiceClient(base, TOKEN, retry_for_s=30)
        worker = Worker(client, builds=builds, gpu_kinds=["cpu"], workdir=tmp_path_factory.mktemp("work"),
                        heartbeat_s=2.0, echo=False)
        worker.register()
        yield base, worker
        client.close()


def _sweep(tmp_path: Path, model: Path, *, max_tokens: int) -> Path:
    body = {
        "name": "pr-check", "build": "nightly-1", "model": str(model),
        "workload": {"dataset": "draftbench", "num_prompts": 6, "max_tokens": max_tokens, "warmup_prompts": 2,
                     "rounds": 3, "min_window_s": 0.5},
        "speculative": [{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3}],
        "backends": ["CPU_ATTN"], "graph_modes": ["NONE"], "gpu_kinds": ["cpu"],
        "engine_args": dict(CPU_ENGINE_ARGS), "timeout_s": 600,
    }
    path = tmp_path / f"sweep-{max_tokens}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def _ci(service: tuple[str, Worker], gh: GitHubState, sweep: Path, tmp_path: Path, *, head: str, build: str,  # noqa: F811
        base_build: str = "nightly-1") -> subprocess.CompletedProcess:
    """``draftbench ci`` as a CI job runs it, while the worker runs the cells it submits."""
    server, worker = service
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DRAFTBENCH_", "GITHUB_"))} | {"GITHUB_TOKEN": GH_TOKEN}
    command = [sys.executable, "-m", "app.cli", "ci", "--server", server, "--token", TOKEN, "--repo", "octo/vllm",
               "--pr", "7", "--head", head, "--base", BASE_SHA, "--build", build, "--base-build", base_build,
               "--sweep", str(sweep), "--github-api", gh.url, "--poll", "0.5",
               "--comment-file", str(tmp_path / f"comment-{head}.md")]
    return beside_worker(worker, command, env=env, cwd=ROOT)


def test_a_pull_request_series_on_real_vllm(service, gh: GitHubState, tmp_path: Path, tiny_model: Path,  # noqa: F811
                                            repeating_model: Path) -> None:
    sweep = _sweep(tmp_path, tiny_model, max_tokens=32)

    aa = _ci(service, gh, sweep, tmp_path, head="aa00001", build="nightly-2")
    print(aa.stdout)
    assert aa.returncode == 0, aa.stderr
    assert aa.stdout.startswith("**draftbench: no regression") and "(head aa00001 vs base base000" in aa.stdout
    assert _ci(service, gh, sweep, tmp_path, head="aa00002", build="nightly-3").returncode == 0

    slow = _ci(service, gh, sweep, tmp_path, head="slow001", build="nightly-4")
    print(slow.stdout)
    assert slow.returncode == 3, slow.stderr
    regressions = slow.stdout.split("#### Regressions")[1].split("####")[0]
    assert "slower" in regressions and "CPU_ATTN" in regressions and "accepting less" not in regressions
    [comment] = gh.comments[7]  # the same pull request's comment, edited in place
    assert "(head slow001 vs base base000" in comment["body"]
    # `draftbench compare` of the sweeps ci stored renders the comment it posted, running nothing.
    [ids] = re.findall(r"\(base sweep (\d+), head sweep (\d+)\)", slow.stdout)
    again = subprocess.run([sys.executable, "-m", "app.cli", "compare", *ids, "--server", service[0]], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert (again.returncode, again.stdout) == (3, slow.stdout), again.stderr

    # The second slowed build of the series: from here the history has three builds before the drop and two after.
    assert _ci(service, gh, sweep, tmp_path, head="slow002", build="nightly-5").returncode == 3
    alerts = httpx.get(f"{service[0]}/api/v1/alerts", timeout=60).json()
    speed = [a for a in alerts if a["metric"] == "tokens_per_s"]
    assert [(a["first_bad_build"], a["last_good_build"]) for a in speed] == [("nightly-4", "nightly-3")], alerts
    assert speed[0]["after"] < 0.5 * speed[0]["before"]

    # Another cell (its own base), on the model whose n-gram drafts are accepted: corrupt drafts lower acceptance.
    corrupt = _ci(service, gh, _sweep(tmp_path, repeating_model, max_tokens=24), tmp_path, head="bad0001", build="pr-corrupt")
    print(corrupt.stdout)
    assert corrupt.returncode == 3, corrupt.stderr
    regressions = corrupt.stdout.split("#### Regressions")[1].split("####")[0]
    assert "accepting less" in regressions and "points [" in regressions
    assert len(gh.comments[7]) == 1
