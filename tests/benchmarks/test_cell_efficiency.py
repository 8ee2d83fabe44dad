"""benchmarks/cell_efficiency.py: its ways, a run's row from a result as runners/cell.py writes it, and that it runs
on a Python with nothing but the standard library (the H200 machine's, beside vLLM)."""

import subprocess
import sys
from pathlib import Path

import pytest

from app.analysis.passes import start_interval
from benchmarks import cell_efficiency

REPO = Path(__file__).resolve().parents[2]


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
    assert cell_efficiency.parse_way("forked+noplan") == (True, {"VLLM_ENABLE_STARTUP_PLAN": "0"})
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
