"""``draftbench bisect`` on real vLLM (the CPU build): a real worker runs each step's cell in its own vLLM process.

Two series of eight builds: in one the fifth build slows each n-gram drafting step by 100 ms
(``examples/patches/ngram-slow-drafting.diff``), in the other the third corrupts the n-gram drafts
(``ngram-corrupt-drafts.diff``, acceptance from 88.9 % to 0 on the repeating model). Each is found in at most 4 rounds:
the good and bad builds, then ceil(log2(7)) = 3 midpoints. A series is labels over the builds its commits made: the
unchanged commits run the unpatched interpreter and those after the first bad one the patched build, as a worker
holding one build per distinct vLLM does (one fork server an interpreter; a patched build copies no environment:
``app.builds.patched`` links the base's package and gives the changed files their own).
"""

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from app.builds import patched
from app.config import Settings
from runners.client import ServiceClient
from runners.worker import Build, Worker
from tests.conftest import TOKEN
from tests.live import beside_worker, serve
from tests.vllm_fixtures import CPU_ENGINE_ARGS

pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parents[2]
PATCHES = ROOT / "examples" / "patches"
# Series name -> (the patch its first bad build brings, that build's position).
SERIES = {"slow": ("ngram-slow-drafting", 4), "corrupt": ("ngram-corrupt-drafts", 2)}
LENGTH = 8
MAX_ROUNDS = 4


def _labels(name: str) -> list[str]:
    return [f"{name}-{i}" for i in range(LENGTH)]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, vllm_python: Path) -> Iterator[tuple[str, Worker]]:
    """The service and a worker holding both series: each label on the unpatched or its series' patched build."""
    root = tmp_path_factory.mktemp("bisect-builds")
    builds = []
    for name, (patch, first_bad) in SERIES.items():
        patched.create(label=patch, base=str(vllm_python), patch=PATCHES / f"{patch}.diff", root=root)
        builds += [Build(label, root / patch / "python" if i >= first_bad else vllm_python)
                   for i, label in enumerate(_labels(name))]
    url = f"sqlite:///{tmp_path_factory.mktemp('bisect-e2e') / 'draftbench.db'}"
    with serve(Settings(database_url=url, token=TOKEN)) as base:
        client = ServiceClient(base, TOKEN, retry_for_s=30)
        worker = Worker(client, builds=builds, gpu_kinds=["cpu"], workdir=tmp_path_factory.mktemp("work"),
                        heartbeat_s=2.0, echo=False)
        worker.register()
        yield base, worker
        client.close()


def _cells(tmp_path: Path, model: Path) -> Path:
    """One n-gram cell, one engine start a build, small: the slowdown is a 100 ms sleep per drafting step (about
    0.13x, called without a noise model from one start a side), acceptance the counters of one start."""
    body = {
        "name": "bisect-ngram", "build": "unused", "model": str(model),
        "workload": {"dataset": "draftbench", "num_prompts": 4, "max_tokens": 24, "warmup_prompts": 1,
                     "rounds": 2, "min_window_s": 0.5},
        "speculative": [{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3}],
        "backends": ["CPU_ATTN"], "graph_modes": ["NONE"], "gpu_kinds": ["cpu"], "repeats": 1,
        "engine_args": dict(CPU_ENGINE_ARGS), "timeout_s": 600,
    }
    path = tmp_path / "cells.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def _bisect(service: tuple[str, Worker], cells: Path, name: str) -> subprocess.CompletedProcess:
    """``draftbench bisect`` over the series, while the worker runs the cells it submits."""
    server, worker = service
    labels = _labels(name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRAFTBENCH_")}
    command = [sys.executable, "-m", "app.cli", "bisect", "--cells", str(cells), "--series", ",".join(labels),
               "--good", labels[0], "--bad", labels[-1], "--server", server, "--token", TOKEN, "--poll", "0.5"]
    return beside_worker(worker, command, env=env, cwd=ROOT)


@pytest.mark.parametrize("name", list(SERIES))
def test_bisect_finds_the_first_bad_build_of_eight_in_four_rounds(service, tmp_path: Path, repeating_model: Path,
                                                                 name: str) -> None:
    started = time.monotonic()
    found = _bisect(service, _cells(tmp_path, repeating_model), name)
    print(found.stdout, f"({time.monotonic() - started:.0f} s)")
    assert found.returncode == 0, found.stderr
    labels, first_bad = _labels(name), SERIES[name][1]
    bisection = next(b for b in httpx.get(f"{service[0]}/api/v1/bisections", timeout=60).json() if b["good"] == labels[0])
    assert (bisection["state"], bisection["first_bad"], bisection["last_good"]) == ("found", labels[first_bad],
                                                                                   labels[first_bad - 1])
    assert len(bisection["steps"]) <= MAX_ROUNDS
    metric = "tokens/s" if name == "slow" else "acceptance"
    assert f"NONE: {metric} worse" in "; ".join(bisection["symptoms"])
    change = "tokens_per_s_change" if name == "slow" else "acceptance_change"
    for step in bisection["steps"]:
        versus = {row["against"]: row for row in step["evidence"]}
        if step["call"] == "bad":
            # Each bad step's evidence carries the interval it was called by.
            interval = versus["good"]["speed_ratio"] if name == "slow" else versus["good"]["acceptance_difference"]
            assert versus["good"]["verdict"] == "worse" and interval["value"] < (0.31 if name == "slow" else -0.05), step
        else:
            # A good step is clear of the change: unchanged against the good build, or reversed against the bad one.
            assert step["call"] == "good" and (versus["good"][change] == "unchanged" or versus["bad"][change] == "better"), step
