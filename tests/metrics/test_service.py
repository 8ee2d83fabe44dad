"""``/metrics``: queue depth and workers from SQL at scrape time, claim latency, cells and crashes."""

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.api.main import create_app
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body


def _scrape(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def _value(samples, metric: str, **labels: str) -> float:
    return samples[(metric, tuple(sorted(labels.items())))]


def test_series_after_claims_and_completions(client, dataset) -> None:
    worker = register_worker(client)
    submit(client, sweep_body(dataset))  # 2 configs x 2 repeats on cpu: 4 jobs
    ok, bad = claim(client, worker), claim(client, worker)
    assert complete(client, ok["job_id"], worker, {"result": cell_result(), "exit_code": 0}).status_code == 200
    assert complete(client, bad["job_id"], worker, {"exit_code": 1, "duration_s": 3}).json()["state"] == "crashed"
    assert client.post(f"/api/v1/workers/{worker.id}/heartbeat", json={"job_ids": []}, headers=worker.headers).status_code == 200

    samples = _scrape(client)
    assert _value(samples, "draftbench_database_up") == 1
    jobs = {state: _value(samples, "draftbench_jobs", state=state, gpu_kind="cpu")
            for state in ("queued", "running", "succeeded", "crashed", "failed")}
    assert jobs == {"queued": 2, "running": 0, "succeeded": 1, "crashed": 1, "failed": 0}
    assert _value(samples, "draftbench_claim_seconds_count", outcome="job") == 2
    assert _value(samples, "draftbench_claim_seconds_sum", outcome="job") > 0
    assert _value(samples, "draftbench_cells_completed_total", state="succeeded", gpu_kind="cpu") == 1
    assert _value(samples, "draftbench_cells_completed_total", state="crashed", gpu_kind="cpu") == 1
    [crash_kind] = [dict(labels)["kind"] for name, labels in samples if name == "draftbench_crashes_total"]
    assert crash_kind == client.get("/api/v1/crashes").json()[0]["kind"]
    assert _value(samples, "draftbench_worker_heartbeats_total") == 1
    assert _value(samples, "draftbench_workers_alive", gpu_kind="cpu") == 1
    age = _value(samples, "draftbench_worker_heartbeat_age_seconds", worker_id=str(worker.id), name="w", host="h")
    assert 0 <= age < 60


def test_an_empty_claim_is_timed_too(client) -> None:
    worker = register_worker(client)
    assert client.post(f"/api/v1/workers/{worker.id}/claim", headers=worker.headers).status_code == 204
    samples = _scrape(client)
    assert _value(samples, "draftbench_claim_seconds_count", outcome="empty") == 1
    # No job yet: no draftbench_jobs series, but the scrape still works.
    assert not [name for name, _ in samples if name == "draftbench_jobs"]


def test_each_app_counts_in_its_own_registry(client, settings) -> None:
    worker = register_worker(client)
    client.post(f"/api/v1/workers/{worker.id}/heartbeat", json={"job_ids": []}, headers=worker.headers)
    other = create_app(settings)
    try:
        with TestClient(other) as second:
            samples = _scrape(second)
            assert _value(samples, "draftbench_worker_heartbeats_total") == 0
            # The gauges come from the shared database, so both apps see the same worker.
            assert _value(samples, "draftbench_workers_alive", gpu_kind="cpu") == 1
    finally:
        other.state.engine.dispose()
    assert _value(_scrape(client), "draftbench_worker_heartbeats_total") == 1
