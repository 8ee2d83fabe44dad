"""The run facts at the top of a page over a real H200 start and a ``vllm bench serve`` file imported beside it: what the
file did not record reads "not recorded", and the CPU engine's cells name their GPU kind beside the H200's name."""

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from tests.dashboards.h200 import DATA, imported_folder, in_process

ROOT = Path(__file__).resolve().parents[2]
# One served ngram cell on the CPU engine, the cell ``tests/data/vllm-bench/serve.json`` measured (its README).
BENCH_CELL = {
    "name": "peer-bench-serve", "build": "vllm-0.32-cpu", "model": "/models/tiny-random",
    "workload": {"dataset": "draftbench", "num_prompts": 4, "max_tokens": 8},
    "speculative": [{"method": "ngram", "num_speculative_tokens": 3}],
    "backends": ["CPU_ATTN"], "graph_modes": ["NONE"], "gpu_kinds": ["cpu"], "repeats": 1, "mode": "serve", "concurrency": [4],
}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    folder = tmp_path_factory.mktemp("facts")
    url = f"sqlite:///{folder / 'facts.db'}"
    imported_folder(url, DATA / "h200-2026-11-30" / "alone" / "h200-peer-alone")
    sweep = folder / "cell.yaml"
    sweep.write_text(yaml.safe_dump(BENCH_CELL))
    subprocess.run([sys.executable, "-m", "app.cli", "import-bench", str(DATA / "vllm-bench" / "serve.json"), "--sweep",
                    str(sweep), "--database-url", url], check=True, capture_output=True, cwd=ROOT)
    yield from in_process(url)


def _facts(html: str) -> dict[str, str]:
    block = html[html.index('id="facts"'):].split("</dl>")[0]
    return dict(re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", block))


@pytest.mark.parametrize("page", ["/matrix", "/fallback", "/history?gpu_kind=cpu&method=ngram"])
def test_a_bench_files_unrecorded_vllm_version_reads_not_recorded_not_a_question_mark(mixed: TestClient, page: str) -> None:
    # The file holds no vLLM version: the facts read "vLLM 0.26.0, ?" and the history's column "?".
    html = mixed.get(page).text
    assert "?" not in _facts(html)["vLLM"] and "not recorded" in _facts(html)["vLLM"]
    assert "<td>?</td>" not in html


def test_the_gpu_fact_names_the_cpu_engine_beside_the_h200(mixed: TestClient) -> None:
    # It read "NVIDIA H200" alone over a table whose rows are H200 and cpu.
    assert _facts(mixed.get("/matrix").text)["GPU"] == "NVIDIA H200, cpu"
    assert _facts(mixed.get("/matrix?gpu_kind=H200").text)["GPU"] == "NVIDIA H200"


def test_a_bench_files_tokens_per_s_says_it_is_one_run_without_an_interval(mixed: TestClient) -> None:
    # It read "640" and "1 start × 1 round" like a cell runner's start, with nothing saying it has no interval.
    note = "from vllm bench: one run, no interval (a hint)"
    for page in ("/matrix", "/serving"):
        html = mixed.get(page).text
        assert html.count(note) == 1, page  # the imported file's cell, not the H200's
    csv = mixed.get("/serving?format=csv&table=serving").text
    assert "vllm-bench" in csv and "source" in csv.splitlines()[0]
