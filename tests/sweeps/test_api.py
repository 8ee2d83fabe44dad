"""Submitting sweeps over REST: the happy paths and every bad input the issue names."""

import pytest
import yaml
from sqlalchemy import func, select

from app.models import Job, Sweep
from tests.conftest import AUTH
from tests.factories import register_worker, submit, sweep_body


@pytest.fixture
def worker_id(client) -> int:  # noqa: ANN001
    return register_worker(client)


def _row_counts(client) -> tuple[int, int]:  # noqa: ANN001
    with client.app.state.sessionmaker() as session:
        return session.scalar(select(func.count()).select_from(Sweep)), session.scalar(select(func.count()).select_from(Job))


def test_json_sweep_expands_to_one_job_per_cell_and_repeat(client, dataset, worker_id) -> None:  # noqa: ANN001
    response = submit(client, sweep_body(dataset))
    assert response.status_code == 201, response.text
    sweep = response.json()
    assert sweep["total"] == 4 and sweep["state"] == "queued"
    assert sorted((c["method"], c["repeat"]) for c in sweep["cells"]) == [
        ("draft_model", 0), ("draft_model", 1), ("ngram", 0), ("ngram", 1)
    ]
    listed = client.get("/api/v1/sweeps").json()
    assert [s["id"] for s in listed] == [sweep["id"]]


def test_yaml_sweep_is_accepted(client, dataset, worker_id) -> None:  # noqa: ANN001
    body = yaml.safe_dump(sweep_body(dataset, repeats=1, baseline=True))
    response = client.post("/api/v1/sweeps", content=body, headers=AUTH | {"content-type": "application/yaml"})
    assert response.status_code == 201, response.text
    assert sorted(str(c["method"]) for c in response.json()["cells"]) == ["None", "draft_model", "ngram"]


def test_gpu_matrix_leaves_out_backends_that_cannot_run_there(client, dataset) -> None:  # noqa: ANN001
    register_worker(client, gpu_kinds=["H200"])
    body = sweep_body(
        dataset,
        attention_backends=["FLASH_ATTN", "FLASHINFER", "CPU_ATTN"],
        cudagraph_modes=["NONE", "PIECEWISE", "FULL_DECODE_ONLY"],
        gpus=["H200", "cpu"],
        repeats=1,
    )
    cells = submit(client, body).json()["cells"]
    # H200: 2 backends x 3 modes x 2 methods; cpu: CPU_ATTN x 3 modes x 2 methods.
    assert len(cells) == 12 + 6
    assert all((c["backend"] == "CPU_ATTN") == (c["gpu_kind"] == "cpu") for c in cells)


@pytest.mark.parametrize(
    ("change", "loc", "allowed"),
    [
        ({"attention_backends": ["FLASH_ATN"]}, ["body", "attention_backends", 0], "FLASHINFER"),
        ({"cudagraph_modes": ["FULL_ONLY"]}, ["body", "cudagraph_modes", 0], "FULL_DECODE_ONLY"),
        ({"speculative": [{"method": "medusa2", "num_speculative_tokens": 3}]}, ["body", "speculative", 0, "method"], "draft_model"),
        ({"gpus": ["H900"]}, ["body", "gpus", 0], "H200"),
    ],
)
def test_unknown_enum_values_name_field_and_allowed_values(client, dataset, worker_id, change, loc, allowed) -> None:  # noqa: ANN001
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
        ({"attention_backends": []}, ["body", "attention_backends"]),
        ({"cudagraph_modes": []}, ["body", "cudagraph_modes"]),
        ({"speculative": []}, ["body", "speculative"]),
        ({"gpus": []}, ["body", "gpus"]),
        ({"repeats": 0}, ["body", "repeats"]),
        ({"build": "vllm-unknown"}, ["body", "build"]),
        ({"surprise": 1}, ["body", "surprise"]),
    ],
)
def test_bad_values_get_422_naming_the_field(client, dataset, worker_id, change, loc) -> None:  # noqa: ANN001
    if "workload" in change and change["workload"].get("dataset") == "DATASET":
        change = {"workload": {**change["workload"], "dataset": str(dataset)}}
    response = submit(client, sweep_body(dataset, **change))
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == loc
    assert _row_counts(client) == (0, 0)


def test_unregistered_build_lists_the_registered_ones(client, dataset, worker_id) -> None:  # noqa: ANN001
    msg = submit(client, sweep_body(dataset, build="nope")).json()["detail"][0]["msg"]
    assert "vllm-test" in msg


def test_empty_matrix_after_backend_gpu_pairing_is_rejected(client, dataset, worker_id) -> None:  # noqa: ANN001
    response = submit(client, sweep_body(dataset, attention_backends=["FLASH_ATTN"], gpus=["cpu"]))
    assert response.status_code == 422
    assert "CPU_ATTN" in response.json()["detail"][0]["msg"]
    assert _row_counts(client) == (0, 0)


def test_matrix_over_the_cell_limit_is_rejected_without_rows(client, dataset, worker_id) -> None:  # noqa: ANN001
    client.app.state.settings.max_cells = 10
    response = submit(client, sweep_body(dataset, repeats=6))  # 2 cells x 6 = 12 jobs
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", "repeats"] and "12 jobs" in detail["msg"] and "10" in detail["msg"]
    assert _row_counts(client) == (0, 0)


def test_body_over_one_mib_gets_413(client, dataset, worker_id) -> None:  # noqa: ANN001
    body = sweep_body(dataset, reason="x" * (1024 * 1024 + 1))
    response = submit(client, body)
    assert response.status_code == 413
    assert "1048576" in response.json()["detail"]
    assert _row_counts(client) == (0, 0)


def test_malformed_json_and_yaml_get_422(client, worker_id) -> None:  # noqa: ANN001
    bad_json = client.post("/api/v1/sweeps", content=b"{nope", headers=AUTH | {"content-type": "application/json"})
    bad_yaml = client.post("/api/v1/sweeps", content=b"a: [1", headers=AUTH | {"content-type": "application/yaml"})
    assert bad_json.status_code == 422 and "JSON" in bad_json.json()["detail"][0]["msg"]
    assert bad_yaml.status_code == 422 and "YAML" in bad_yaml.json()["detail"][0]["msg"]


def test_same_idempotency_key_returns_the_first_sweep(client, dataset, worker_id) -> None:  # noqa: ANN001
    first = submit(client, sweep_body(dataset), **{"Idempotency-Key": "ci-run-42"})
    again = submit(client, sweep_body(dataset), **{"Idempotency-Key": "ci-run-42"})
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert _row_counts(client) == (1, 4)


def test_writes_need_the_token_and_reads_do_not(client, dataset) -> None:  # noqa: ANN001
    assert client.post("/api/v1/sweeps", json=sweep_body(dataset)).status_code == 401
    wrong = client.post("/api/v1/sweeps", json=sweep_body(dataset), headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert client.get("/api/v1/sweeps").status_code == 200


def test_cancel_stops_queued_jobs(client, dataset, worker_id) -> None:  # noqa: ANN001
    sweep_id = submit(client, sweep_body(dataset)).json()["id"]
    cancelled = client.post(f"/api/v1/sweeps/{sweep_id}/cancel", headers=AUTH).json()
    assert cancelled["state"] == "cancelled" and cancelled["counts"] == {"cancelled": 4}
    assert client.post(f"/api/v1/workers/{worker_id}/claim", headers=AUTH).status_code == 204


def test_unknown_sweep_is_404(client) -> None:  # noqa: ANN001
    assert client.get("/api/v1/sweeps/999").status_code == 404
    assert client.post("/api/v1/sweeps/999/cancel", headers=AUTH).status_code == 404


def test_openapi_shows_every_model(client) -> None:  # noqa: ANN001
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for name in ("SweepSpec", "SweepDetail", "ResultOut", "CrashGroupDetail", "RegisterRequest", "CompleteRequest", "CellOutcome", "CellResult"):
        assert name in schemas, name
