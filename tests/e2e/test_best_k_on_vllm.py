"""Best k and break-even on real vLLM (CPU): ngram at k 1 and 2 with the baseline, at batch sizes 2 and 4, run by
the real cell runner, imported, pooled, and read back as the lines ``/serving?mode=offline`` and
``/api/v1/speedups`` show. CPU speeds are noisy: the test checks where each number comes from, never a winner."""

from pathlib import Path

import pytest
from sqlalchemy import select

from app.analysis.speedup import Pays
from app.cells import best_k
from app.cells import service as cell_service
from app.cells.scope import CellScope
from app.models import Result
from app.schemas.sweep import SweepSpec
from app.sweeps.imports import import_sweep
from runners import offline
from runners.folders import read_folder, write_cells
from tests.vllm_fixtures import CPU_ENGINE_ARGS

BATCHES = (2, 4)


@pytest.mark.vllm
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_stored_results_of_two_k_and_two_batch_sizes_give_the_best_k_and_break_even(
        vllm_python, tiny_model, tmp_path: Path, migrated_sessions) -> None:
    for batch in BATCHES:
        spec = SweepSpec.model_validate({
            "name": f"best-k-{batch}", "build": "vllm-cpu-bestk", "model": str(tiny_model), "baseline": True,
            "workload": {"num_prompts": batch, "max_tokens": 16, "rounds": 2, "min_window_s": 0.2},
            "speculative": [{"method": "ngram", "num_speculative_tokens": [1, 2], "prompt_lookup_max": 3, "prompt_lookup_min": 1}],
            "backends": ["CPU_ATTN"], "graph_modes": ["NONE"], "gpu_kinds": ["cpu"],
            "engine_args": dict(CPU_ENGINE_ARGS), "timeout_s": 600,
        })
        folder = tmp_path / f"run-{batch}"
        assert write_cells(spec, folder) == 3
        for summary in offline.run_folder(folder, python=str(vllm_python), pycache=tmp_path / "pycache"):
            cell = folder / "cells" / summary["cell"]
            assert summary["exit_code"] == 0, (cell / "cell.log").read_text()[-3000:]
        found = read_folder(folder)
        with migrated_sessions.begin() as session:
            import_sweep(session=session, spec=found.spec, ran=found.ran, digest=found.digest)

    with migrated_sessions() as session:
        cells = cell_service.load(session=session, scope=CellScope(build="vllm-cpu-bestk"))
        stored = dict(session.execute(select(Result.job_id, Result.tokens_per_s)).tuples().all())
    [line] = best_k.lines(cells, "offline")
    assert (line.method, line.backend, line.resolved_graph_mode, line.name) == ("ngram", "CPU_ATTN", "NONE", "ngram")
    assert (line.ks, line.loads) == ([1, 2], list(BATCHES))
    for member in line.cells:
        # One start a cell: its speedup is its stored tokens/s over its baseline's, at the same batch size.
        [mine], [theirs] = member.cell.job_ids, member.baseline.job_ids
        assert member.speedup.value == pytest.approx(stored[mine] / stored[theirs])
        assert member.baseline.method is None and member.tau > 1.0 - 1e-9
        # Two k fit T(k) exactly, and offline T = B tau / tokens/s: the prediction is the measured speedup.
        assert member.prediction.predicted == pytest.approx(member.speedup.value)
    for batch in BATCHES:
        best = line.best[batch]
        here = {m.k: m.speedup.value for m in line.cells if m.load == batch}
        assert best.speedup.value == max(here.values()) and best.k in here
        assert best_k.best_sentence(best, batch, "offline").startswith(f"best k: {best.k} at {batch} sequences")
    for k in (1, 2):
        assert line.break_even[k].pays in set(Pays)
        assert best_k.break_even_sentence(line, k).startswith(f"ngram k={k} on CPU_ATTN")
