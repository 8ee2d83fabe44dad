"""Sweeps from submission to stored, derived, grouped results, on real vLLM (the CPU build).

The service runs for real (uvicorn, SQLite), the worker runs in-process against it over HTTP, and
every cell is a real ``runners/cell.py`` process in the vLLM environment, forked from the build's fork server
(the worker's default, ``runners/forkserver.py``): crashes and timeouts included.
"""

import json
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from runners.client import ServiceClient
from runners.worker import Build, Worker
from tests.conftest import AUTH, TOKEN
from tests.live import serve
from tests.vllm_fixtures import CPU_ENGINE_ARGS, MIDDLE_BAND

pytestmark = pytest.mark.vllm
BUILD = "vllm-cpu-test"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory):
    url = f"sqlite:///{tmp_path_factory.mktemp('e2e') / 'draftbench.db'}"
    with serve(Settings(database_url=url, token=TOKEN)) as base:
        yield base


@pytest.fixture(scope="module")
def worker(service: str, vllm_python: Path, tmp_path_factory: pytest.TempPathFactory):
    client = ServiceClient(service, TOKEN, retry_for_s=30)
    w = Worker(client, builds=[Build(BUILD, vllm_python)], gpu_kinds=["cpu"], workdir=tmp_path_factory.mktemp("work"),
               heartbeat_s=2.0, echo=False, pycache=tmp_path_factory.mktemp("pycache"))
    w.register()
    yield w
    w.close()
    client.close()


def _sweep(model: Path, dataset: Path | str, speculative: list[dict], **extra) -> dict:
    return {
        "name": "e2e",
        "build": BUILD,
        "model": str(model),
        "workload": {"dataset": str(dataset), "num_prompts": 6, "max_tokens": 32, "warmup_prompts": 2,
                     "rounds": 3, "min_window_s": 0.5},
        "speculative": speculative,
        "backends": ["CPU_ATTN"],
        "graph_modes": ["NONE"],
        "gpu_kinds": ["cpu"],
        "engine_args": dict(CPU_ENGINE_ARGS),
        "timeout_s": 600,
        **extra,
    }


def _run(service: str, worker: Worker, body: dict) -> int:
    sweep = httpx.post(f"{service}/api/v1/sweeps", json=body, headers=AUTH, timeout=30)
    assert sweep.status_code == 201, sweep.text
    worker.run(exit_when_idle=True)
    return sweep.json()["id"]


def test_sweep_runs_to_results_with_baseline(service, worker, tiny_model, perturbed_draft, prompts) -> None:
    speculative = [
        {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1},
        {"method": "draft_model", "model": str(tiny_model), "num_speculative_tokens": 3},
        {"method": "draft_model", "model": str(perturbed_draft), "num_speculative_tokens": 3},
    ]
    # The prompts shipped with draftbench, by name: nothing outside the checkout is read.
    sweep_id = _run(service, worker, _sweep(tiny_model, "draftbench", speculative, baseline=True))
    sweep = httpx.get(f"{service}/api/v1/sweeps/{sweep_id}").json()
    assert sweep["state"] == "finished" and sweep["counts"] == {"succeeded": 4}
    # One job per cell, in the matrix's order: the baseline first, then the speculative configs.
    rows = sorted(httpx.get(f"{service}/api/v1/results", params={"sweep_id": sweep_id}).json(), key=lambda r: r["job_id"])
    base, ngram, draft, perturbed = rows
    assert [r["method"] for r in rows] == [None, "ngram", "draft_model", "draft_model"]
    for row in rows:
        assert row["output_tokens"] == 6 * 32 and row["tokens_per_s"] > 0
        assert row["resolved_backend"] == "CPU_ATTN" and row["resolved_graph_mode"] == "NONE"
        assert row["vllm_version"].startswith("0.32") and row["model_runner"] == "V1"
        # Three rounds: the median with its order-statistic interval (75 % for n = 3), and what they cost.
        assert row["rounds"] == 3 and row["tokens_per_s_low"] <= row["tokens_per_s"] <= row["tokens_per_s_high"]
        assert 0 < row["efficiency"] < 1 and row["measured_s"] >= 1.5
        assert 0 < row["import_s"] < row["measured_s"] / row["efficiency"]
    assert ngram["num_draft_tokens"] > 0 and 0 <= ngram["num_accepted_tokens"] <= ngram["num_draft_tokens"]
    # The target drafting for itself at temperature 0 must agree with itself.
    assert draft["acceptance_rate"] >= 0.9 and draft["acceptance_rate_low"] <= draft["acceptance_rate"]
    assert draft["mean_acceptance_length"] > 3.5
    # The perturbed target accepts in part: a middle rate, its interval under the target-as-draft's, not degenerate.
    low, high = MIDDLE_BAND
    assert low < perturbed["acceptance_rate"] < high and perturbed["acceptance_rate_high"] < draft["acceptance_rate_low"]
    assert 1 < perturbed["mean_acceptance_length"] < draft["mean_acceptance_length"]
    assert not perturbed["degenerate"]
    # Speculation is lossless at temperature 0: same tokens as the baseline.
    assert draft["lossless_share"] == 1.0 and ngram["lossless_share"] == 1.0 and perturbed["lossless_share"] == 1.0
    assert draft["speedup"] > 0 and base["speedup"] is None
    log = httpx.get(f"{service}/api/v1/jobs/{ngram['job_id']}/log")
    assert log.status_code == 200 and "cell result written" in log.text
    # The cells compiled the model's code into the worker's bytecode cache (its build check loads no model).
    assert any(path.name.startswith("qwen3.") for path in worker.pycache.rglob("*.pyc"))
    # Every cell was forked from the build's fork server (which imported vLLM and its engine's worker before the
    # first), timed each pass of each round and ran with the harness's garbage-collector settings, and its vLLM was
    # let reuse a startup plan (the CPU engine sizes its KV cache without one).
    for row in rows:
        [path] = worker.workdir.glob(f"job-{row['job_id']}-*/result.json")
        result = json.loads(path.read_text())
        assert result["schema_version"] == 9 and result["harness"]["forked"]
        assert result["harness"]["gc_freeze"] and result["harness"]["gc_pause"] and result["harness"]["startup_plan"]
        for measured in result["rounds"]:
            assert measured["passes"] and sum(p["output_tokens"] for p in measured["passes"]) == measured["output_tokens"]
            assert sum(p["seconds"] for p in measured["passes"]) == pytest.approx(measured["seconds"])
    [server_log] = worker.workdir.glob("forkserver-*.log")
    ready = json.loads(server_log.read_text().split("fork server ready: ")[1].splitlines()[0])
    assert ready["engine_modules"] == ["vllm.v1.worker.gpu_worker", "vllm.v1.worker.gpu_model_runner"]
    # vLLM was imported before they started: only a cell that started the server paid for its import.
    assert sum(row["import_s"] < 1.0 for row in rows) >= len(rows) - 1, [row["import_s"] for row in rows]


def test_crashes_group_by_signature_and_stay_apart_by_cause(service, worker, tiny_model, prompts) -> None:
    synthetic = {"method": "draft_model", "model": str(tiny_model), "num_speculative_tokens": 3,
                 "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.5, 0.5, 0.5]}
    crash_sweep = _run(service, worker, _sweep(tiny_model, prompts, [synthetic], repeats=2))
    timeout_sweep = _run(service, worker, _sweep(tiny_model, prompts, [synthetic], timeout_s=1))
    bad_arg_sweep = _run(service, worker, _sweep(tiny_model, prompts, [synthetic], engine_args={**CPU_ENGINE_ARGS, "dtype": "float7"}))

    jobs = {s: httpx.get(f"{service}/api/v1/jobs", params={"sweep_id": s}).json() for s in (crash_sweep, timeout_sweep, bad_arg_sweep)}
    assert [j["state"] for j in jobs[crash_sweep]] == ["crashed", "crashed"]
    assert [j["state"] for j in jobs[timeout_sweep]] == ["timed_out"]
    assert [j["state"] for j in jobs[bad_arg_sweep]] == ["crashed"]

    groups = {g["signature"]: g for g in httpx.get(f"{service}/api/v1/crashes").json()}
    by_job = {}
    for signature in groups:
        for job_id in httpx.get(f"{service}/api/v1/crashes/{signature}").json()["job_ids"]:
            by_job[job_id] = signature
    first, second = (by_job[j["id"]] for j in jobs[crash_sweep])
    assert first == second, "two runs of the same crash must share a signature"
    assert "Synthetic acceptance not supported with CPU sampling" in groups[first]["message"]
    assert groups[first]["count"] == 2
    timeout_sig, bad_arg_sig = by_job[jobs[timeout_sweep][0]["id"]], by_job[jobs[bad_arg_sweep][0]["id"]]
    assert len({first, timeout_sig, bad_arg_sig}) == 3
    assert groups[timeout_sig]["kind"] == "timeout"
    # An allowed engine argument with a value vLLM refuses (unknown names are refused at submission).
    assert "float7" in groups[bad_arg_sig]["message"] and "dtype" in groups[bad_arg_sig]["message"]
    # The worker survived all of it and the full logs are downloadable.
    log = httpx.get(f"{service}/api/v1/jobs/{jobs[crash_sweep][0]['id']}/log").text
    assert "EngineDeadError" in log or "Engine core" in log
    # Each cell crashed or timed out in a child of the build's fork server, which served on.
    [server] = worker.fork_servers.servers.values()
    assert server.refused is None and server.ready is not None


def test_a_random_token_workload_needs_no_file(service, worker, tiny_model) -> None:
    body = _sweep(tiny_model, "random", [{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}])
    body["workload"] |= {"input_len": 48, "range_ratio": 0.25, "seed": 7}
    sweep_id = _run(service, worker, body)
    [row] = httpx.get(f"{service}/api/v1/results", params={"sweep_id": sweep_id}).json()
    raw = httpx.get(f"{service}/api/v1/jobs/{row['job_id']}").json()
    assert raw["state"] == "succeeded" and row["output_tokens"] == 6 * 32
    job_log = httpx.get(f"{service}/api/v1/jobs/{row['job_id']}/log").text
    assert "cell result written" in job_log


def test_serving_mode_measures_latency_and_the_servers_counters(service, worker, tiny_model) -> None:
    body = _sweep(tiny_model, "draftbench", [{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3,
                                               "prompt_lookup_min": 1}], mode="serve", concurrency=[2])
    body["workload"] |= {"rounds": 2, "min_window_s": 1.0}
    sweep_id = _run(service, worker, body)
    [row] = httpx.get(f"{service}/api/v1/results", params={"sweep_id": sweep_id}).json()
    assert (row["mode"], row["concurrency"], row["rounds"]) == ("serve", 2, 2)
    assert row["import_s"] is None  # the server imports vLLM inside its engine start
    serving = row["serving"]
    assert serving["concurrency"] == 2 and serving["completed"] >= 12 and serving["failed"] == 0
    assert 0 <= serving["empty"] <= serving["completed"]  # completed streams whose tokens decoded to no text
    for metric in ("ttft_ms", "tpot_ms", "itl_ms"):
        assert 0 < serving[metric]["p50"] <= serving[metric]["p90"] <= serving[metric]["p99"]
    assert serving["output_tokens_per_s"] > 0 and row["num_draft_tokens"] > 0
    assert 0 <= row["num_accepted_tokens"] <= row["num_draft_tokens"]
    # Each request's counts from its stream (cell schema 9), stored as sums that add up to the server's counters.
    assert row["requests"] is not None and row["counter_problems"] == []
    categories = row["requests"]["categories"]
    assert sum(c["draft_tokens"] for c in categories) == row["num_draft_tokens"]
    assert sum(c["accepted"] for c in categories) == row["num_accepted_tokens"]


def test_vllms_environment_is_an_axis_and_each_cell_records_its_model_runner(service, worker, tiny_model) -> None:
    body = _sweep(tiny_model, "draftbench", [{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}],
                  env={"VLLM_USE_V2_MODEL_RUNNER": ["0", "1"]})
    body["workload"] |= {"rounds": 1}
    sweep_id = _run(service, worker, body)
    jobs = {j["spec"]["env"]["VLLM_USE_V2_MODEL_RUNNER"]: j for j in
            httpx.get(f"{service}/api/v1/jobs", params={"sweep_id": sweep_id}).json()}
    assert jobs["0"]["state"] == "succeeded"
    [row] = httpx.get(f"{service}/api/v1/results", params={"sweep_id": sweep_id}).json()
    assert row["env"] == {"VLLM_USE_V2_MODEL_RUNNER": "0"} and row["model_runner"] == "V1"
    # The CPU build has no Triton: asked for the V2 runner, vLLM refuses to start. A crash, recorded as one.
    assert jobs["1"]["state"] == "crashed" and "V2 requires Triton" in jobs["1"]["error"]
