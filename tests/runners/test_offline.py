"""runners/offline.py: a folder of cells run without the service, on real vLLM (CPU), then imported; and its cells'
environment, the worker's: vLLM's variables and the bytecode cache."""

import json
from pathlib import Path

import pytest

from app.schemas.sweep import SweepSpec
from app.sweeps.imports import import_sweep
from runners import execute, offline
from runners.folders import read_folder, write_cells
from tests.vllm_fixtures import CPU_ENGINE_ARGS


def test_offline_cells_get_their_vllm_variables_and_the_bytecode_cache(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = execute.cell_env({"VLLM_USE_V2_MODEL_RUNNER": "1"}, tmp_path)
    assert env["VLLM_USE_V2_MODEL_RUNNER"] == "1" and env["PYTHONUNBUFFERED"] == "1"
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path) and "PYTHONDONTWRITEBYTECODE" not in env
    assert execute.cell_env({}, None)["PYTHONDONTWRITEBYTECODE"] == "1"


def test_cells_let_vllm_reuse_its_startup_plan_unless_the_host_or_the_sweep_says_not(monkeypatch) -> None:
    monkeypatch.delenv("VLLM_ENABLE_STARTUP_PLAN", raising=False)
    assert execute.cell_env({}, None)["VLLM_ENABLE_STARTUP_PLAN"] == "1"
    assert execute.cell_env({"VLLM_ENABLE_STARTUP_PLAN": "0"}, None)["VLLM_ENABLE_STARTUP_PLAN"] == "0"
    monkeypatch.setenv("VLLM_ENABLE_STARTUP_PLAN", "0")
    assert execute.cell_env({}, None)["VLLM_ENABLE_STARTUP_PLAN"] == "0"
    assert execute.cell_env({"VLLM_ENABLE_STARTUP_PLAN": "1"}, None)["VLLM_ENABLE_STARTUP_PLAN"] == "1"


@pytest.mark.vllm
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # one engine start; the import itself is tested on both
def test_a_folder_runs_without_the_service_and_imports_as_it_ran(vllm_python, tiny_model, tmp_path, migrated_sessions) -> None:
    spec = SweepSpec.model_validate({
        "name": "offline", "build": "vllm-cpu-offline", "model": str(tiny_model),
        "workload": {"num_prompts": 6, "max_tokens": 32, "rounds": 3, "min_window_s": 0.5},
        "speculative": [{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}],
        "backends": ["CPU_ATTN"], "graph_modes": ["NONE"], "gpu_kinds": ["cpu"],
        "engine_args": dict(CPU_ENGINE_ARGS), "timeout_s": 600,
    })
    folder, cache = tmp_path / "run", tmp_path / "pycache"
    assert write_cells(spec, folder) == 1
    [summary] = offline.run_folder(folder, python=str(vllm_python), pycache=cache)
    assert summary["exit_code"] == 0 and summary["tokens_per_s"] > 0, (folder / "cells" / summary["cell"] / "cell.log").read_text()[-3000:]
    result = json.loads((folder / "cells" / summary["cell"] / "result.json").read_text())
    assert len(result["rounds"]) == 3 and result["import_s"] > 0
    assert any(path.name.startswith("qwen3.") for path in cache.rglob("*.pyc"))
    # Run again with --only-missing: nothing left to run.
    assert offline.run_folder(folder, python=str(vllm_python), only_missing=True, pycache=cache) == []

    found = read_folder(folder)
    with migrated_sessions.begin() as session:
        imported = import_sweep(session=session, spec=found.spec, ran=found.ran, digest=found.digest)
        sweep, created = imported.sweep, imported.created
        [job] = sweep.jobs
        assert created and job.state.value == "succeeded"
        assert job.result.tokens_per_s == pytest.approx(sorted(r["output_tokens"] / r["seconds"] for r in result["rounds"])[1])
        assert job.result.resolved_backend == "CPU_ATTN" and job.result.num_draft_tokens > 0


@pytest.mark.vllm
def test_a_list_of_k_runs_one_cell_per_k_with_that_many_positions(vllm_python, tiny_model, tmp_path) -> None:
    # The smallest such sweep: one ngram config with k [2, 1], two engine starts forked from one import of vLLM.
    spec = SweepSpec.model_validate({
        "name": "k-axis", "build": "vllm-cpu-offline", "model": str(tiny_model),
        "workload": {"num_prompts": 2, "max_tokens": 16, "rounds": 1, "min_window_s": 0.1},
        "speculative": [{"method": "ngram", "num_speculative_tokens": [2, 1], "prompt_lookup_max": 3, "prompt_lookup_min": 1}],
        "backends": ["CPU_ATTN"], "graph_modes": ["NONE"], "gpu_kinds": ["cpu"],
        "engine_args": dict(CPU_ENGINE_ARGS), "timeout_s": 600,
    })
    folder = tmp_path / "run"
    assert write_cells(spec, folder) == 2
    summaries = offline.run_folder(folder, python=str(vllm_python), pycache=tmp_path / "pycache")
    assert [s["cell"] for s in summaries] == ["c0000-r0", "c0001-r0"]
    for summary, k in zip(summaries, (1, 2), strict=True):
        cell = folder / "cells" / summary["cell"]
        assert summary["exit_code"] == 0, (cell / "cell.log").read_text()[-3000:]
        assert json.loads((cell / "spec.json").read_text())["speculative"]["num_speculative_tokens"] == k
        counters = json.loads((cell / "result.json").read_text())["spec_decode"]
        assert len(counters["accepted_per_position"]) == k, counters
        assert counters["num_draft_tokens"] > 0, counters
