"""Cells as files: expand a sweep, and import real results made on an H200 (vLLM 0.26.0) elsewhere.

``tests/data/h200-matrix`` is the folder `runners/offline.py` filled on the lent H200 on 2026-11-30
(3 backends x 3 graph modes x draft_model/dflash, random 8-layer Qwen3, load_format=dummy).
"""

import json
import shutil
from pathlib import Path

import yaml

from app.schemas.sweep import SweepSpec
from runners.imports import import_folder, write_cells

H200 = Path(__file__).resolve().parents[1] / "data" / "h200-matrix"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-sweep.yaml"


def test_expand_writes_the_same_cells_that_ran_on_the_h200(tmp_path: Path) -> None:
    spec = SweepSpec.model_validate(yaml.safe_load(EXAMPLE.read_text()))
    assert write_cells(spec, tmp_path) == 18
    written = sorted(p.name for p in (tmp_path / "cells").iterdir())
    assert written == sorted(p.name for p in (H200 / "cells").iterdir())
    for name in written:
        assert json.loads((tmp_path / "cells" / name / "spec.json").read_text()) == json.loads(
            (H200 / "cells" / name / "spec.json").read_text()
        )


def test_h200_results_import_with_what_ran(migrated_sessions) -> None:  # noqa: ANN001
    with migrated_sessions.begin() as session:
        sweep = import_folder(session=session, folder=H200)
        jobs = {(j.backend, j.graph_mode, j.method): j for j in sweep.jobs}
        assert "imported" in sweep.tags and len(jobs) == 18
        assert {j.state.value for j in jobs.values()} == {"succeeded"}
        for (backend, mode, method), job in jobs.items():
            result = job.result
            assert result.vllm_version == "0.26.0" and result.gpu_name == "NVIDIA H200"
            assert result.tokens_per_s > 0 and result.output_tokens == 32 * 128
            # FlashInfer cannot replay full graphs with spec decode: vLLM fell back to PIECEWISE.
            downgraded = backend == "FLASHINFER" and mode != "NONE"
            assert result.graph_downgraded is downgraded, (backend, mode, method)
            assert result.resolved_graph_mode == ("PIECEWISE" if downgraded else mode)
            if method == "draft_model":
                assert result.acceptance_rate >= 0.99 and result.mean_acceptance_length > 3.9
            else:
                # A random DFlash draft guesses nothing right; its graphs are captured only beside a full-graph target.
                assert result.acceptance_rate == 0.0
                assert result.draft_eager is downgraded
                assert result.resolved_draft_graph_mode == ("NONE" if downgraded or mode == "NONE" else "FULL")


def test_a_cell_that_never_ran_stays_queued(migrated_sessions, tmp_path: Path) -> None:  # noqa: ANN001
    folder = tmp_path / "partial"
    shutil.copytree(H200, folder)
    (folder / "cells" / "c0017-r0" / "exit.json").unlink()
    with migrated_sessions.begin() as session:
        sweep = import_folder(session=session, folder=folder)
        states = [j.state.value for j in sweep.jobs]
    assert states.count("succeeded") == 17 and states.count("queued") == 1


def test_exit_zero_without_a_usable_result_is_a_failure_not_a_crash(migrated_sessions, tmp_path: Path) -> None:  # noqa: ANN001
    folder = tmp_path / "broken"
    shutil.copytree(H200, folder)
    (folder / "cells" / "c0000-r0" / "result.json").write_text("{not json")
    with migrated_sessions.begin() as session:
        job = next(j for j in import_folder(session=session, folder=folder).jobs if j.cell_index == 0)
        assert job.state.value == "failed" and "result JSON is unusable" in job.error
