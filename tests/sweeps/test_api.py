"""Submitting sweeps over REST: the happy paths and every bad input the issue names."""

from datetime import timedelta

import pytest
import yaml
from sqlalchemy import func, select

from app.models import Job, Sweep, Worker, utcnow
from tests.conftest import AUTH
from tests.factories import register_worker, submit, sweep_body


@pytest.fixture
def worker(client):
    return register_worker(client)


def _row_counts(client) -> tuple[int, int]:
    with client.app.state.sessionmaker() as session:
        return session.scalar(select(func.count()).select_from(Sweep)), session.scalar(select(func.count()).select_from(Job))


def test_json_sweep_expands_to_one_job_per_cell_and_repeat(client, dataset, worker) -> None:
    response = submit(client, sweep_body(dataset))
    assert response.status_code == 201, response.text
    sweep = response.json()
    assert sweep["total"] == 4 and sweep["state"] == "queued"
    assert sorted((j["method"], j["repeat"]) for j in sweep["jobs"]) == [
        ("draft_model", 0), ("draft_model", 1), ("ngram", 0), ("ngram", 1)
    ]
    # The jobs' name before it was jobs, still sent for clients that read it.
    assert sweep["cells"] == sweep["jobs"]
    listed = client.get("/api/v1/sweeps").json()
    assert [s["id"] for s in listed] == [sweep["id"]]


def test_yaml_sweep_is_accepted(client, dataset, worker) -> None:
    body = yaml.safe_dump(sweep_body(dataset, repeats=1, baseline=True))
    response = client.post("/api/v1/sweeps", content=body, headers=AUTH | {"content-type": "application/yaml"})
    assert response.status_code == 201, response.text
    assert sorted(str(j["method"]) for j in response.json()["jobs"]) == ["None", "draft_model", "ngram"]


def test_gpu_matrix_leaves_out_backends_that_cannot_run_there(client, dataset) -> None:
    register_worker(client, gpu_kinds=["H200"])
    body = sweep_body(
        dataset,
        backends=["FLASH_ATTN", "FLASHINFER", "CPU_ATTN"],
        graph_modes=["NONE", "PIECEWISE", "FULL_DECODE_ONLY"],
        gpu_kinds=["H200", "cpu"],
        repeats=1,
    )
    jobs = submit(client, body).json()["jobs"]
    # H200: 2 backends x 3 modes x 2 methods; cpu: CPU_ATTN x 3 modes x 2 methods.
    assert len(jobs) == 12 + 6
    assert all((j["backend"] == "CPU_ATTN") == (j["gpu_kind"] == "cpu") for j in jobs)


@pytest.mark.parametrize(
    ("change", "loc", "allowed"),
    [
        ({"backends": ["FLASH_ATN"]}, ["body", "backends", 0], "FLASHINFER"),
        ({"graph_modes": ["FULL_ONLY"]}, ["body", "graph_modes", 0], "FULL_DECODE_ONLY"),
        ({"speculative": [{"method": "medusa2", "num_speculative_tokens": 3}]}, ["body", "speculative", 0, "method"], "draft_model"),
        ({"gpu_kinds": ["H900"]}, ["body", "gpu_kinds", 0], "H200"),
    ],
)
def test_unknown_enum_values_name_field_and_allowed_values(client, dataset, worker, change, loc, allowed) -> None:
    response = submit(client, sweep_body(dataset, **change))
    assert response.status_code == 422
    error = response.json()["detail"][0]
    assert error["loc"] == loc
    assert allowed in error["msg"]
    assert _row_counts(client) == (0, 0)


@pytest.mark.parametrize(
    ("change", "loc"),
    [
        ({"workload": {"dataset": "/nonexistent/questions.jsonl"}}, ["body", "workload", "dataset"]),
        ({"workload": {"dataset": "DATASET", "max_tokens": -5}}, ["body", "workload", "max_tokens"]),
        ({"speculative": [{"method": "ngram", "num_speculative_tokens": -1}]}, ["body", "speculative", 0, "num_speculative_tokens"]),
        ({"backends": []}, ["body", "backends"]),
        ({"graph_modes": []}, ["body", "graph_modes"]),
        ({"speculative": []}, ["body", "speculative"]),
        ({"gpu_kinds": []}, ["body", "gpu_kinds"]),
        ({"repeats": 0}, ["body", "repeats"]),
        ({"build": "vllm-unknown"}, ["body", "build"]),
        ({"surprise": 1}, ["body", "surprise"]),
    ],
)
def test_bad_values_get_422_naming_the_field(client, dataset, worker, change, loc) -> None:
    if "workload" in change and change["workload"].get("dataset") == "DATASET":
        change = {"workload": {**change["workload"], "dataset": str(dataset)}}
    response = submit(client, sweep_body(dataset, **change))
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == loc
    assert _row_counts(client) == (0, 0)


def test_unregistered_build_lists_the_registered_ones(client, dataset, worker) -> None:
    msg = submit(client, sweep_body(dataset, build="nope")).json()["detail"][0]["msg"]
    assert "vllm-test" in msg


def test_empty_matrix_after_backend_gpu_pairing_is_rejected(client, dataset, worker) -> None:
    response = submit(client, sweep_body(dataset, backends=["FLASH_ATTN"], gpu_kinds=["cpu"]))
    assert response.status_code == 422
    assert "CPU_ATTN" in response.json()["detail"][0]["msg"]
    assert _row_counts(client) == (0, 0)


def test_matrix_over_the_cell_limit_is_rejected_without_rows(client, dataset, worker) -> None:
    client.app.state.settings.max_jobs = 10
    response = submit(client, sweep_body(dataset, repeats=6))  # 2 cells x 6 = 12 jobs
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", "repeats"] and "12 jobs" in detail["msg"] and "10" in detail["msg"]
    assert _row_counts(client) == (0, 0)


def test_body_over_one_mib_gets_413(client, dataset, worker) -> None:
    body = sweep_body(dataset, reason="x" * (1024 * 1024 + 1))
    response = submit(client, body)
    assert response.status_code == 413
    assert "1048576" in response.json()["detail"]
    assert _row_counts(client) == (0, 0)


def test_malformed_json_and_yaml_get_422(client, worker) -> None:
    bad_json = client.post("/api/v1/sweeps", content=b"{nope", headers=AUTH | {"content-type": "application/json"})
    bad_yaml = client.post("/api/v1/sweeps", content=b"a: [1", headers=AUTH | {"content-type": "application/yaml"})
    assert bad_json.status_code == 422 and "JSON" in bad_json.json()["detail"][0]["msg"]
    assert bad_yaml.status_code == 422 and "YAML" in bad_yaml.json()["detail"][0]["msg"]


def test_same_idempotency_key_returns_the_first_sweep(client, dataset, worker) -> None:
    first = submit(client, sweep_body(dataset), **{"Idempotency-Key": "ci-run-42"})
    again = submit(client, sweep_body(dataset), **{"Idempotency-Key": "ci-run-42"})
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert _row_counts(client) == (1, 4)


def test_an_empty_idempotency_key_is_422_not_no_key(client, dataset, worker) -> None:
    # Before: "" counted as no key, so each resend of a request that meant one made another sweep.
    response = submit(client, sweep_body(dataset), **{"Idempotency-Key": ""})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["header", "idempotency-key"]
    assert _row_counts(client) == (0, 0)


DRAFT = {"method": "draft_model", "model": "/models/tiny"}


@pytest.mark.parametrize(
    ("speculative", "index", "fragment"),
    [([{**DRAFT, "num_speculative_tokens": 3}, {**DRAFT, "num_speculative_tokens": 3}], 1,
      "speculative[1] makes the cell of speculative[0] with num_speculative_tokens 3 again"),
     ([{**DRAFT, "num_speculative_tokens": [1, 2, 4]}, {"method": "ngram", "num_speculative_tokens": 2},
       {**DRAFT, "num_speculative_tokens": [4, 8]}], 2, "the cell of speculative[0] with num_speculative_tokens 4")],
    ids=["identical-entries", "k-axes-sharing-a-k"],
)
def test_a_speculative_config_repeating_a_cell_is_422_naming_it(client, dataset, worker, speculative, index, fragment) -> None:
    # Before: 201, two cells of one config hash, each run (and paid for) twice.
    response = submit(client, sweep_body(dataset, speculative=speculative))
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "speculative", index] and fragment in error["msg"], error
    assert _row_counts(client) == (0, 0)


def test_configs_that_differ_only_past_a_shared_k_are_distinct_cells(client, dataset, worker) -> None:
    """The same draft with another key, or a calibration draft whose rates differ, is another cell."""
    calibration = {**DRAFT, "rejection_sample_method": "synthetic"}
    speculative = [{**DRAFT, "num_speculative_tokens": 3}, {**DRAFT, "num_speculative_tokens": 3, "enforce_eager": True},
                   {**calibration, "num_speculative_tokens": 2, "synthetic_acceptance_rates": [0.9, 0.8]},
                   {**calibration, "num_speculative_tokens": 2, "synthetic_acceptance_rates": [0.9, 0.7]}]
    assert submit(client, sweep_body(dataset, speculative=speculative)).status_code == 201


def test_writes_need_the_token_and_reads_do_not(client, dataset) -> None:
    assert client.post("/api/v1/sweeps", json=sweep_body(dataset)).status_code == 401
    wrong = client.post("/api/v1/sweeps", json=sweep_body(dataset), headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert client.get("/api/v1/sweeps").status_code == 200


def test_cancel_stops_queued_jobs(client, dataset, worker) -> None:
    sweep_id = submit(client, sweep_body(dataset)).json()["id"]
    cancelled = client.post(f"/api/v1/sweeps/{sweep_id}/cancel", headers=AUTH).json()
    assert cancelled["state"] == "cancelled" and cancelled["counts"] == {"cancelled": 4}
    assert client.post(f"/api/v1/workers/{worker.id}/claim", headers=worker.headers).status_code == 204


def test_unknown_sweep_is_404(client) -> None:
    assert client.get("/api/v1/sweeps/999").status_code == 404
    assert client.post("/api/v1/sweeps/999/cancel", headers=AUTH).status_code == 404


def test_openapi_shows_every_model(client) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    named = ("SweepSpec", "SweepDetail", "ResultOut", "CrashGroupDetail", "RegisterRequest", "CompleteRequest", "JobOutcome", "CellResult")
    for name in named:
        assert name in schemas, name


def test_the_deprecated_axis_names_still_expand_the_same_matrix(client, dataset, worker) -> None:
    new = submit(client, sweep_body(dataset, name="new")).json()
    old_body = sweep_body(dataset, name="old")
    for old, current in (("attention_backends", "backends"), ("cudagraph_modes", "graph_modes"), ("gpus", "gpu_kinds")):
        old_body[old] = old_body.pop(current)
    old = submit(client, old_body)
    assert old.status_code == 201, old.text
    assert [j["backend"] for j in old.json()["jobs"]] == [j["backend"] for j in new["jobs"]]
    assert old.json()["spec"]["backends"] == ["CPU_ATTN"] and "attention_backends" not in old.json()["spec"]


def _token(client, name: str) -> dict[str, str]:
    secret = client.post("/api/v1/tokens", json={"name": name, "scopes": ["submit"]}, headers=AUTH).json()["secret"]
    return {"Authorization": f"Bearer {secret}"}


def test_an_idempotency_key_belongs_to_the_token_that_sent_it(client, dataset, worker) -> None:
    alice, bob = _token(client, "alice"), _token(client, "bob")
    key = {"Idempotency-Key": "ci-run-7"}
    first = client.post("/api/v1/sweeps", json=sweep_body(dataset, name="alice's"), headers=alice | key)
    other = client.post("/api/v1/sweeps", json=sweep_body(dataset, name="bob's"), headers=bob | key)
    assert first.status_code == 201 and other.status_code == 201
    assert other.json()["id"] != first.json()["id"] and other.json()["name"] == "bob's"
    again = client.post("/api/v1/sweeps", json=sweep_body(dataset, name="alice's"), headers=alice | key)
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]


def test_the_same_key_with_another_sweep_is_409_and_creates_nothing(client, dataset, worker) -> None:
    key = {"Idempotency-Key": "ci-run-8"}
    assert submit(client, sweep_body(dataset), **key).status_code == 201
    changed = submit(client, sweep_body(dataset, repeats=1), **key)
    assert changed.status_code == 409 and "another sweep" in changed.json()["detail"]
    assert _row_counts(client) == (1, 4)


def test_a_custom_class_draft_needs_an_admin_token(client, dataset, worker) -> None:
    body = sweep_body(dataset, speculative=[{"method": "custom_class", "model": "pkg.mod.Proposer", "num_speculative_tokens": 3}])
    refused = client.post("/api/v1/sweeps", json=body, headers=_token(client, "dev"))
    assert refused.status_code == 403 and "admin" in refused.json()["detail"]
    assert submit(client, body).status_code == 201  # the bootstrap token is an admin


def test_a_sweep_no_live_worker_serves_is_accepted_with_warnings(client, dataset, worker) -> None:
    served = submit(client, sweep_body(dataset)).json()
    assert served["warnings"] == []
    register_worker(client, gpu_kinds=["H200"], builds=["vllm-h200"])
    body = sweep_body(dataset, build="vllm-h200", gpu_kinds=["B200", "H200"], backends=["FLASH_ATTN"], repeats=1,
                      speculative=[{"method": "ngram", "num_speculative_tokens": 3}],
                      engine_args={"tensor_parallel_size": 2})
    response = submit(client, body)
    assert response.status_code == 201
    warnings = response.json()["warnings"]
    assert len(warnings) == 2 and "GPU kind B200" in warnings[0] and "H200" in warnings[1] and "2 GPUs" in warnings[1]
    # The same words on every read, and on the sweep's page.
    assert client.get(f"/api/v1/sweeps/{response.json()['id']}").json()["warnings"] == warnings
    assert "no live worker serves GPU kind B200" in client.get(f"/sweeps/{response.json()['id']}").text


def test_a_dead_worker_serves_no_sweep(client, dataset, worker) -> None:
    with client.app.state.sessionmaker.begin() as session:
        session.get(Worker, worker.id).last_heartbeat_at = utcnow() - timedelta(hours=1)
    warnings = submit(client, sweep_body(dataset)).json()["warnings"]
    assert warnings == ["no live worker serves GPU kind cpu with build vllm-test: 4 job(s) wait until one registers"]
