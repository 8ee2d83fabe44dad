"""A worker token is one worker: each registration gets its own credential, and no one else acts for it."""

import pytest

from tests.conftest import AUTH
from tests.factories import cell_result, claim, complete, heartbeat, register_worker, submit, sweep_body, upload_log


def _host_token(client, name: str) -> dict[str, str]:
    secret = client.post("/api/v1/tokens", json={"name": name, "scopes": ["worker"]}, headers=AUTH).json()["secret"]
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def two_hosts(client, dataset):
    """Worker 1 (host token W1) holds a job; worker 2 registered with another host's token W2."""
    first = register_worker(client, headers=_host_token(client, "host-1"))
    second = register_worker(client, headers=_host_token(client, "host-2"))
    submit(client, sweep_body(dataset, repeats=1))
    return first, second, claim(client, first)


def test_a_neighbour_cannot_claim_beat_log_or_complete_for_another_worker(client, two_hosts) -> None:
    first, second, job = two_hosts
    as_first = type(first)(id=first.id, headers=second.headers, info={})  # worker 2's credential, worker 1's id
    assert client.post(f"/api/v1/workers/{first.id}/claim", headers=second.headers).status_code == 403
    assert heartbeat(client, as_first, [job["job_id"]]).status_code == 403
    # Log and result routes know the worker by its credential: worker 2 does not hold worker 1's job.
    assert upload_log(client, job["job_id"], second, "forged").status_code == 409
    forged = complete(client, job["job_id"], second, {"result": cell_result(tokens_per_s=99999.0), "exit_code": 0})
    assert forged.status_code == 409
    assert client.get("/api/v1/results").json() == []
    # Worker 1's own report still lands.
    assert complete(client, job["job_id"], first, {"result": cell_result(), "exit_code": 0}).status_code == 200
    [row] = client.get("/api/v1/results").json()
    assert row["tokens_per_s"] == 100.0


def test_host_tokens_register_but_act_for_no_worker(client, two_hosts) -> None:
    first, _, job = two_hosts
    host = _host_token(client, "host-3")
    for method, path, body in (
        ("post", f"/api/v1/workers/{first.id}/claim", None),
        ("post", f"/api/v1/workers/{first.id}/heartbeat", {"job_ids": []}),
        ("post", f"/api/v1/jobs/{job['job_id']}/complete", {"outcome": {"exit_code": 0}}),
        ("put", f"/api/v1/jobs/{job['job_id']}/log", None),
    ):
        for headers in (host, AUTH):  # the bootstrap admin token acts for no worker either
            response = client.request(method, path, json=body, headers=headers)
            assert response.status_code == 403, (path, response.text)
            assert "credential" in response.json()["detail"]


def test_a_worker_credential_cannot_register_workers(client) -> None:
    # The probe: worker A's credential registered worker C2, whose credential outlived A's host token.
    host = _host_token(client, "host-a")
    first = register_worker(client, headers=host)
    again = client.post("/api/v1/workers", json={"name": "c2", "host": "h", "gpu_kinds": ["cpu"],
                                                 "builds": [{"label": "vllm-test"}]}, headers=first.headers)
    assert again.status_code == 403, again.text
    assert "host's token" in again.json()["detail"] and "'worker'-scope" in again.json()["detail"]
    assert [w["id"] for w in client.get("/api/v1/workers").json()] == [first.id]
    # The host's token still registers (and an admin's, which holds every scope).
    assert register_worker(client, headers=host).id != first.id
    assert register_worker(client, headers=AUTH).id != first.id


def test_revoking_a_host_token_ends_its_workers_credentials(client, dataset) -> None:
    host = _host_token(client, "host-r")
    worker = register_worker(client, headers=host)
    [token] = [t for t in client.get("/api/v1/tokens", headers=AUTH).json() if t["name"] == "host-r"]
    assert client.post(f"/api/v1/workers/{worker.id}/claim", headers=worker.headers).status_code == 204
    client.delete(f"/api/v1/tokens/{token['id']}", headers=AUTH)
    assert client.post(f"/api/v1/workers/{worker.id}/claim", headers=worker.headers).status_code == 401


def test_no_worker_can_rewrite_a_builds_recorded_vllm_version(client) -> None:
    body = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "vllm-x", "vllm_version": "0.26.0"}]}
    assert client.post("/api/v1/workers", json=body, headers=AUTH).status_code == 201
    body = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "vllm-x", "vllm_version": "0.99.0"}]}
    refused = client.post("/api/v1/workers", json=body, headers=_host_token(client, "h2"))
    assert refused.status_code == 409 and "0.26.0" in refused.json()["detail"]
    assert [b["vllm_version"] for b in client.get("/api/v1/builds").json()] == ["0.26.0"]
