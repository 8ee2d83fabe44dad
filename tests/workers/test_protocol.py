"""The worker protocol over HTTP: register, claim, heartbeat, log, complete; results and crashes read back."""

import csv
import io
import json

import pytest

from tests.conftest import AUTH
from tests.factories import cell_result, claim, complete, heartbeat, register_worker, submit, sweep_body, upload_log

SYNTHETIC_LOG = """\
(EngineCore_DP0 pid=4242) ERROR 11-30 00:01:02 [core.py:1012] EngineCore encountered a fatal error.
(EngineCore_DP0 pid=4242) ERROR 11-30 00:01:02 [core.py:1012] Traceback (most recent call last):
(EngineCore_DP0 pid=4242) ERROR 11-30 00:01:02 [core.py:1012]   File "/venv/lib/python3.11/site-packages/vllm/v1/engine/core.py", line 1003, in run_engine_core
(EngineCore_DP0 pid=4242) ERROR 11-30 00:01:02 [core.py:1012]     engine_core.run_busy_loop()
(EngineCore_DP0 pid=4242) ERROR 11-30 00:01:02 [core.py:1012]   File "/venv/lib/python3.11/site-packages/vllm/v1/sample/rejection_sampler.py", line 88, in forward
(EngineCore_DP0 pid=4242) ERROR 11-30 00:01:02 [core.py:1012]     assert not synthetic, "Synthetic acceptance not supported with CPU sampling"
(EngineCore_DP0 pid=4242) ERROR 11-30 00:01:02 [core.py:1012] AssertionError: Synthetic acceptance not supported with CPU sampling
Traceback (most recent call last):
  File "/tmp/runners/cell.py", line 300, in <module>
vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""


@pytest.fixture
def running(client, dataset):
    worker = register_worker(client)
    sweep = submit(client, sweep_body(dataset, repeats=1)).json()
    return worker, sweep["id"], claim(client, worker)


_complete = complete


def test_claimed_job_carries_the_canonical_cell_spec(running) -> None:
    _, _, job = running
    assert job["attempt"] == 1
    assert job["spec"]["backend"] == "CPU_ATTN" and job["spec"]["speculative"]["method"] == "ngram"


def test_the_claim_answer_still_sends_the_spec_as_cell_for_deployed_workers(client, running) -> None:
    _, _, job = running
    assert job["cell"] == job["spec"]
    listed = client.get(f"/api/v1/jobs/{job['job_id']}").json()
    assert listed["config"] == listed["spec"] == job["spec"]


def test_a_result_is_stored_with_derived_metrics_and_what_ran(client, running) -> None:
    worker, sweep_id, job = running
    resolved = {"resolved_backend": "CPU_ATTN", "resolved_graph_mode": "NONE", "draft_eager": False}
    response = _complete(client, job["job_id"], worker, {"result": cell_result(), "resolved": resolved, "exit_code": 0, "duration_s": 15})
    assert response.status_code == 200 and response.json()["state"] == "succeeded"
    [row] = client.get("/api/v1/results", params={"sweep_id": sweep_id}).json()
    assert row["acceptance_rate"] == pytest.approx(0.5)
    assert row["mean_acceptance_length"] == pytest.approx(2.5)
    assert row["acceptance_rate_low"] < 0.5 < row["acceptance_rate_high"]
    assert row["resolved_backend"] == "CPU_ATTN" and row["resolved_graph_mode"] == "NONE"
    # 20 drafts; positions accepted 15, 10 and 5 times.
    assert [round(p[0], 6) for p in row["per_position"]] == [0.75, 0.5, 0.25]
    assert all(low < rate < high for rate, low, high in row["per_position"])
    assert client.get("/api/v1/results", params={"method": "draft_model"}).json() == []
    assert client.get("/api/v1/results", params={"backend": "NOPE"}).status_code == 422


def test_csv_export_has_one_line_per_result(client, running) -> None:
    worker, sweep_id, job = running
    _complete(client, job["job_id"], worker, {"result": cell_result(), "exit_code": 0})
    response = client.get("/api/v1/results.csv", params={"sweep_id": sweep_id})
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == 1 and json.loads(rows[0]["accepted_per_position"]) == [15, 10, 5] and float(rows[0]["tokens_per_s"]) == 100.0


def test_a_crash_is_signed_from_its_log_and_grouped(client, dataset, running) -> None:
    worker, _, job = running
    second = claim(client, worker)
    for claimed in (job, second):
        log = SYNTHETIC_LOG.replace("4242", str(claimed["job_id"] * 1000))
        assert upload_log(client, claimed["job_id"], worker, log).status_code == 204
        response = _complete(client, claimed["job_id"], worker, {"exit_code": 1, "duration_s": 20})
        assert response.json()["state"] == "crashed"
    [group] = client.get("/api/v1/crashes").json()
    assert group["count"] == 2 and group["exception_type"].endswith("AssertionError")
    detail = client.get(f"/api/v1/crashes/{group['signature']}").json()
    assert sorted(detail["job_ids"]) == sorted([job["job_id"], second["job_id"]]) and detail["builds"] == ["vllm-test"]
    log = client.get(f"/api/v1/jobs/{job['job_id']}/log")
    assert "Synthetic acceptance not supported" in log.text


def test_timeout_is_its_own_state_and_kind(client, running) -> None:
    worker, _, job = running
    assert _complete(client, job["job_id"], worker, {"timed_out": True, "signal": 9, "duration_s": 1}).json()["state"] == "timed_out"
    assert client.get("/api/v1/crashes").json()[0]["kind"] == "timeout"


def test_heartbeat_tells_the_worker_to_stop_a_cancelled_job(client, running) -> None:
    worker, sweep_id, job = running
    beat = heartbeat(client, worker, [job["job_id"]])
    assert beat.json() == {"stop": []}
    client.post(f"/api/v1/sweeps/{sweep_id}/cancel", headers=AUTH)
    beat = heartbeat(client, worker, [job["job_id"]])
    assert beat.json() == {"stop": [job["job_id"]]}
    # A result for a job the worker no longer holds is refused, and nothing is stored.
    assert _complete(client, job["job_id"], worker, {"result": cell_result(), "exit_code": 0}).status_code == 409
    assert client.get("/api/v1/results").json() == []


def test_another_worker_cannot_complete_or_log_a_job_it_does_not_hold(client, running) -> None:
    _, _, job = running
    other = register_worker(client)
    assert _complete(client, job["job_id"], other, {"result": cell_result(), "exit_code": 0}).status_code == 409
    assert upload_log(client, job["job_id"], other, "x").status_code == 409


def test_baseline_gives_speedup_and_lossless_share(client, dataset) -> None:
    worker = register_worker(client)
    body = sweep_body(dataset, repeats=1, baseline=True, speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    sweep_id = submit(client, body).json()["id"]
    claimed = [claim(client, worker) for _ in range(2)]
    for job in claimed:
        baseline = job["spec"]["speculative"] is None
        result = cell_result(tokens_per_s=50.0 if baseline else 100.0, fingerprints=("a", "b") if baseline else ("a", "c"))
        if baseline:
            result["spec_decode"] = None
        _complete(client, job["job_id"], worker, {"result": result, "exit_code": 0})
    rows = {r["method"]: r for r in client.get("/api/v1/results", params={"sweep_id": sweep_id}).json()}
    assert rows["ngram"]["speedup"] == pytest.approx(2.0) and rows["ngram"]["lossless_share"] == pytest.approx(0.5)
    assert rows[None]["speedup"] is None and rows[None]["acceptance_rate"] is None


def test_workers_and_builds_are_listed(client) -> None:
    register_worker(client, builds=["vllm-a", "vllm-b"])
    assert [w["builds"] for w in client.get("/api/v1/workers").json()] == [["vllm-a", "vllm-b"]]
    assert [b["label"] for b in client.get("/api/v1/builds").json()] == ["vllm-a", "vllm-b"]


def test_a_claim_for_another_worker_is_403(client) -> None:
    worker = register_worker(client)
    assert client.post("/api/v1/workers/999/claim", headers=worker.headers).status_code == 403


def test_the_sweep_shows_per_cell_what_ran_and_the_crash_signature(client, running) -> None:
    worker, sweep_id, job = running
    resolved = {"resolved_backend": "FLASHINFER", "resolved_graph_mode": "PIECEWISE", "graph_downgraded": True, "draft_eager": True}
    _complete(client, job["job_id"], worker, {"result": cell_result(), "resolved": resolved, "exit_code": 0})
    crashed = claim(client, worker)
    _complete(client, crashed["job_id"], worker, {"timed_out": True, "signal": 9, "duration_s": 1})
    statuses = {j["job_id"]: j for j in client.get(f"/api/v1/sweeps/{sweep_id}").json()["jobs"]}
    succeeded, timed_out = statuses[job["job_id"]], statuses[crashed["job_id"]]
    assert (succeeded["resolved_backend"], succeeded["resolved_graph_mode"]) == ("FLASHINFER", "PIECEWISE")
    assert succeeded["graph_downgraded"] and succeeded["draft_eager"] and succeeded["tokens_per_s"] == 100.0
    assert succeeded["crash_signature"] is None
    [group] = client.get("/api/v1/crashes").json()
    assert timed_out["state"] == "timed_out" and timed_out["crash_signature"] == group["signature"]
    assert timed_out["resolved_graph_mode"] is None and not timed_out["graph_downgraded"]


@pytest.mark.parametrize(
    ("change", "loc"),
    [({"gpu_count": True}, ["body", "gpu_count"]),
     ({"gpu_count": "8"}, ["body", "gpu_count"]),
     ({"gpu_kinds": ["H100", "H100"]}, ["body", "gpu_kinds"]),
     ({"builds": [{"label": "a", "vllm_version": "1"}, {"label": "a", "vllm_version": "2"}]}, ["body", "builds"])],
    ids=["gpu-count-true", "gpu-count-text", "gpu-kind-twice", "build-twice"],
)
def test_a_registration_of_the_wrong_type_or_naming_a_value_twice_is_422_naming_it(client, change, loc) -> None:
    # Before: true registered one GPU and "8" eight; a GPU kind twice was stored twice; a build twice with two
    # versions was a 409 blaming a version recorded by nobody.
    body = {"name": "w", "host": "h", "gpu_kinds": ["H100"], "builds": [{"label": "a"}], **change}
    response = client.post("/api/v1/workers", json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == loc
    assert client.get("/api/v1/workers").json() == [] and client.get("/api/v1/builds").json() == []
