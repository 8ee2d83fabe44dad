"""Tensor-parallel cells on real vLLM (CPU): one n-gram cell at ``tensor_parallel_size`` 1, 2 and 3 (an engine-argument
axis), run by the real cell runner, imported and read back as ``/api/v1/parallel`` reads it. The CPU engine runs each
rank in a process of its own (``Worker_TP0``, ``Worker_TP1``); ``VLLM_CPU_OMP_THREADS_BIND=nobind`` lets two ranks share
two cores (vLLM's automatic binding wants a NUMA node per rank). The tiny model has 4 attention heads: at 3 vLLM refuses
the config, a crash of its own group. CPU speeds are noisy and the random model's greedy tokens move with the ranks'
summation order: the test checks where each number comes from, never that the two sizes agree."""

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from app.cells import parallel
from app.cells import service as cell_service
from app.cells.scope import CellScope
from app.enums import CrashKind
from app.models import Crash, Job, Result
from app.schemas.sweep import SweepSpec
from app.sweeps.imports import import_sweep
from runners import offline
from runners.folders import read_folder, write_cells
from tests.vllm_fixtures import CPU_ENGINE_ARGS


@pytest.mark.vllm
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_two_rank_cell_is_compared_with_one_rank_and_an_impossible_size_is_its_own_crash(
        vllm_python, tiny_model, tmp_path: Path, migrated_sessions) -> None:
    spec = SweepSpec.model_validate({
        "name": "parallel", "build": "vllm-cpu-tp", "model": str(tiny_model),
        "workload": {"num_prompts": 4, "max_tokens": 16, "rounds": 2, "min_window_s": 0.2},
        "speculative": [{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}],
        "backends": ["CPU_ATTN"], "graph_modes": ["NONE"], "gpu_kinds": ["cpu"],
        "engine_args": {**CPU_ENGINE_ARGS, "tensor_parallel_size": [1, 2, 3]},
        "env": {"VLLM_CPU_OMP_THREADS_BIND": ["nobind"]}, "timeout_s": 600,
    })
    folder = tmp_path / "run"
    assert write_cells(spec, folder) == 3
    exits = {}
    for summary in offline.run_folder(folder, python=str(vllm_python), pycache=tmp_path / "pycache"):
        exits[summary["cell"]] = summary["exit_code"]
    logs = {cell: (folder / "cells" / cell / "cell.log").read_text() for cell in exits}
    by_size = {json.loads((folder / "cells" / cell / "spec.json").read_text())["engine_args"]["tensor_parallel_size"]: cell
               for cell in exits}
    assert exits[by_size[1]] == 0 and exits[by_size[2]] == 0, logs[by_size[2]][-3000:]
    assert exits[by_size[3]] != 0
    # Both ranks of the two-rank cell ran and logged: each its own process.
    assert "(Worker_TP0 pid=" in logs[by_size[2]] and "(Worker_TP1 pid=" in logs[by_size[2]]

    found = read_folder(folder)
    with migrated_sessions.begin() as session:
        import_sweep(session=session, spec=found.spec, ran=found.ran, digest=found.digest)
    with migrated_sessions() as session:
        cells = cell_service.load(session=session, scope=CellScope(build="vllm-cpu-tp"))
        rows = session.execute(select(Job, Result).join(Result, Result.job_id == Job.id)).tuples()
        stored = {job.spec["engine_args"]["tensor_parallel_size"]: result for job, result in rows}
        crashes = session.execute(select(Crash)).scalars().all()
        session.expunge_all()

    two, three = sorted(parallel.twins(cells), key=lambda t: t.sizes)
    assert (two.sizes, three.sizes) == ((2, None), (3, None))
    # The two-rank cell's counters and speed against the one-rank cell's, as stored (one start each).
    assert (two.acceptance.base_rate, two.acceptance.head_rate) == (
        stored[1].num_accepted_tokens / stored[1].num_draft_tokens, stored[2].num_accepted_tokens / stored[2].num_draft_tokens)
    assert two.speed.value == pytest.approx(stored[2].tokens_per_s / stored[1].tokens_per_s)
    assert two.cell.resolved_graph_modes == two.one_gpu.resolved_graph_modes == {"NONE"}
    # Three ranks: refused by vLLM's config check, beside its twin with nothing measured, in a crash group of its own.
    assert three.acceptance is None and three.speed is None and three.cell.died == 1
    [crash] = crashes
    assert crash.kind == CrashKind.EXCEPTION and "divisible by tensor parallel size" in crash.message
    assert parallel.sentence(three) == "tensor_parallel_size=3: nothing measured beside the one-GPU cell (1 crashed)"
