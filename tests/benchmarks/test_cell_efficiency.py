"""benchmarks/cell_efficiency.py: its ways, a run's row from a result as runners/cell.py writes it, that it runs
on a Python with nothing but the standard library (the H200 machine's, beside vLLM), and its run on an H100
(``tests/data/h100-2026-12-06/cell-efficiency``; docs/h200-report.md)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.analysis.passes import start_interval
from benchmarks import cell_efficiency

REPO = Path(__file__).resolve().parents[2]
H100 = REPO / "tests" / "data" / "h100-2026-12-06" / "cell-efficiency"


def test_a_way_is_a_base_and_modifiers_that_set_the_cells_environment() -> None:
    assert cell_efficiency.parse_way("fresh") == (False, {})
    assert cell_efficiency.parse_way("forked+inproc+nogc-pause") == (
        True, {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "DRAFTBENCH_GC_PAUSE": "0"})
    with pytest.raises(ValueError, match="begins with one of fresh, forked"):
        cell_efficiency.parse_way("zygote")
    with pytest.raises(ValueError, match="'gc' is not one of inproc, nogc"):
        cell_efficiency.parse_way("forked+gc")


def test_a_runs_row_is_the_results_times_and_the_interval_the_service_stores() -> None:
    # Two rounds of five passes of 100 tokens: 1 s each but one 2 s pass in the second round.
    rounds = [{"seconds": 5.0, "output_tokens": 500, "passes": [{"seconds": 1.0, "output_tokens": 100}] * 5},
              {"seconds": 6.0, "output_tokens": 500,
               "passes": [{"seconds": 1.0, "output_tokens": 100}] * 4 + [{"seconds": 2.0, "output_tokens": 100}]}]
    result = {"import_s": 0.05, "engine_start_s": 20.0, "warmup_s": 1.0, "wall_s": 32.0, "rounds": rounds,
              "harness": {"forked": True}}
    row = cell_efficiency.measured(result, run_s=36.0)
    interval, passes = start_interval([(5.0, 500, [(1.0, 100)] * 5), (6.0, 500, [(1.0, 100)] * 4 + [(2.0, 100)])])
    assert (row["measured_s"], row["efficiency"], row["run_s"], row["passes"]) == (11.0, 11.0 / 32.0, 36.0, passes)
    # The median of 100 and 83.3 tok/s, and the service's interval for it.
    assert row["tokens_per_s"] == pytest.approx(91.667, abs=1e-3) == interval.median
    assert (row["low"], row["high"], row["level"]) == (interval.low, interval.high, 0.95)
    # Passes at 100 tok/s but one at 50: their coefficient of variation.
    assert row["pass_cv"] == pytest.approx(15.811 / 95.0, rel=1e-3)


def test_the_benchmark_imports_nothing_beside_the_standard_library() -> None:
    """-S: no site-packages, as on a machine whose Python has vLLM's packages and none of the service's."""
    done = subprocess.run([sys.executable, "-S", "-c", "import benchmarks.cell_efficiency"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_start_says_what_vllm_did_with_its_startup_plan() -> None:
    # The lines vLLM 0.26's v1/worker/startup_plan.py logs, as they stand in a cell's log.
    assert cell_efficiency.parse_way("forked+noplan+noengine") == (
        True, {"VLLM_ENABLE_STARTUP_PLAN": "0", "DRAFTBENCH_ENGINE_PRELOAD": "0"})
    saved = "INFO [gpu_worker.py:560] Available KV cache memory: 16.99 GiB\nINFO [startup_plan.py:189] Saved startup plan to /c/p.json\n"
    applied = "INFO [startup_plan.py:153] Applying persisted startup plan (fingerprint ab12): kv_cache_memory_bytes=1\n"
    refused = ("INFO Startup plan not applied: current free memory (78.60 GiB) is below the recorded baseline "
               "(78.66 GiB); falling back to full memory profiling.\n")
    assert [cell_efficiency.plan_outcome(log) for log in (saved, applied, refused + saved, "no plan here")] == [
        "saved", "applied", "refused", "-"]
    rounds = [{"seconds": 1.0, "output_tokens": 100, "passes": [{"seconds": 1.0, "output_tokens": 100}]}]
    result = {"engine_start_s": 1.0, "warmup_s": 0.1, "wall_s": 2.0, "rounds": rounds}
    assert cell_efficiency.measured(result, 2.5, "applied")["plan"] == "applied"


def test_a_fork_servers_ready_line_in_words() -> None:
    assert cell_efficiency.server_text({"import_s": 9.51, "engine_import_s": 1.42,
                                        "engine_modules": ["vllm.v1.worker.gpu_worker"], "engine_skipped": None}) == (
        "vLLM in 9.51 s, the engine worker in 1.42 s")
    assert cell_efficiency.server_text({"import_s": 9.5, "engine_import_s": None, "engine_modules": [],
                                        "engine_skipped": "its import initialised CUDA"}) == (
        "vLLM in 9.50 s, not the engine worker (its import initialised CUDA)")
    assert cell_efficiency.server_text(None) == "never ready"


def _stored_rows() -> dict[str, dict]:
    """The H100 run's rows, made again from each start's result.json and cell.log (run_s was not kept: the wall's)."""
    rows = {}
    for folder in sorted((H100 / "runs").iterdir()):
        result = json.loads((folder / "result.json").read_text())
        rows[folder.name] = cell_efficiency.measured(result, result["wall_s"],
                                                     cell_efficiency.plan_outcome((folder / "cell.log").read_text()))
    return rows


def test_on_an_h100_a_warm_8b_draft_cell_measures_more_than_half_its_wall_time() -> None:
    # Qwen3-8B's shape as its own draft (k=3), FLASH_ATTN, FULL_AND_PIECEWISE, the default 5 rounds of 5 s, through the
    # fork server as the worker runs it. Run 0 of each way paid its server's import (20.95 s and 7.52 s) and the first
    # also the compile (148 s engine start); the three warm starts: 53.9 %, 55.2 %, 54.5 %.
    rows = _stored_rows()
    assert sorted(rows) == ["0-forked", "0-forked+noplan", "1-forked", "1-forked+noplan", "2-forked"]
    warm = [rows[name] for name in ("1-forked", "1-forked+noplan", "2-forked")]
    assert [round(row["efficiency"], 3) for row in warm] == [0.539, 0.552, 0.545]
    assert all(21 < row["engine_start_s"] < 23 and row["import_s"] < 0.05 for row in warm)
    assert (round(rows["0-forked"]["efficiency"], 2), round(rows["0-forked+noplan"]["efficiency"], 2)) == (0.14, 0.41)
    # The table the benchmark printed there holds the same starts.
    printed = (H100 / "ce.md").read_text()
    assert all(f"{row['tokens_per_s']:.1f} [" in printed for row in rows.values())


def test_on_an_h100_vllm_saved_its_startup_plan_and_never_applied_it_to_a_draft_cell() -> None:
    # vLLM 0.26 keys the plan by the config's hash before profiling, but saves it under the hash after the V1 model
    # runner rounded the CUDA-graph sizes to multiples of 1 + k (adjust_cudagraph_sizes_for_spec_decode), so a draft
    # cell with FULL decode graphs never finds its plan: every start with it profiled memory and saved again.
    rows = _stored_rows()
    assert {name: row["plan"] for name, row in rows.items()} == {
        "0-forked": "saved", "1-forked": "saved", "2-forked": "saved", "0-forked+noplan": "-", "1-forked+noplan": "-"}
    saved = {line.split("Saved startup plan to ")[1] for folder in (H100 / "runs").iterdir()
             for line in (folder / "cell.log").read_text().splitlines() if "Saved startup plan to " in line}
    assert len(saved) == 1


def test_on_an_h100_the_fork_servers_imported_vllms_engine_worker_and_left_cuda_alone() -> None:
    for log in sorted(H100.glob("forkserver-*.log")):
        [line] = [line for line in log.read_text().splitlines() if line.startswith("fork server ready: ")]
        ready = json.loads(line.removeprefix("fork server ready: "))
        assert ready["cuda_initialised"] is False and ready["engine_skipped"] is None
        assert ready["engine_modules"] == ["vllm.v1.worker.gpu_worker", "vllm.v1.worker.gpu_model_runner"]
        assert 1.0 < ready["engine_import_s"] < 2.1
