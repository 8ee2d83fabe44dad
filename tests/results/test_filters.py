"""Filters on results and crashes: requested and resolved values apart, flags, crash kind, and no unknown names."""

import pytest

from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body, upload_log


@pytest.fixture
def three_cells(client, dataset):
    """Three FULL_AND_PIECEWISE cells: one ran as asked, one downgraded to PIECEWISE with an eager draft, one timed out."""
    worker = register_worker(client, gpu_kinds=["H200"])
    body = sweep_body(dataset, gpu_kinds=["H200"], backends=["FLASH_ATTN", "FLASHINFER"], graph_modes=["FULL_AND_PIECEWISE"],
                      repeats=1, speculative=[{"method": "draft_model", "model": "/m", "num_speculative_tokens": 3}],
                      baseline=True)
    sweep = submit(client, body).json()
    jobs = {(j["spec"]["backend"], j["spec"]["speculative"] is None): j for j in (claim(client, worker) for _ in range(4))}
    as_asked = {"resolved_backend": "FLASH_ATTN", "resolved_graph_mode": "FULL_AND_PIECEWISE"}
    downgraded = {"resolved_backend": "FLASHINFER", "resolved_graph_mode": "PIECEWISE", "graph_downgraded": True, "draft_eager": True}
    complete(client, jobs["FLASH_ATTN", False]["job_id"], worker, {"result": cell_result(), "resolved": as_asked, "exit_code": 0})
    complete(client, jobs["FLASHINFER", False]["job_id"], worker, {"result": cell_result(), "resolved": downgraded, "exit_code": 0})
    complete(client, jobs["FLASH_ATTN", True]["job_id"], worker, {"timed_out": True, "signal": 9})
    upload_log(client, jobs["FLASHINFER", True]["job_id"], worker, "Traceback (most recent call last):\nRuntimeError: boom\n")
    complete(client, jobs["FLASHINFER", True]["job_id"], worker, {"exit_code": 1})
    return sweep, jobs


def _ids(client, **params) -> list[int]:
    response = client.get("/api/v1/results", params=params)
    assert response.status_code == 200, response.text
    return sorted(r["job_id"] for r in response.json())


def test_flags_and_resolved_values_filter_what_ran(client, three_cells) -> None:
    _, jobs = three_cells
    downgraded, as_asked = jobs["FLASHINFER", False]["job_id"], jobs["FLASH_ATTN", False]["job_id"]
    assert _ids(client, graph_downgraded="true") == [downgraded]
    assert _ids(client, graph_downgraded="false") == [as_asked]
    assert _ids(client, draft_eager="true") == [downgraded]
    # Requested and resolved graph modes are separate filters.
    assert _ids(client, graph_mode="FULL_AND_PIECEWISE") == sorted([as_asked, downgraded])
    assert _ids(client, graph_mode="PIECEWISE") == []
    assert _ids(client, resolved_graph_mode="PIECEWISE") == [downgraded]
    assert _ids(client, resolved_backend="FLASHINFER", resolved_graph_mode="PIECEWISE") == [downgraded]


def test_crashes_filter_by_kind(client, three_cells) -> None:
    kinds = {g["kind"] for g in client.get("/api/v1/crashes").json()}
    assert kinds == {"timeout", "exception"}
    assert [g["kind"] for g in client.get("/api/v1/crashes", params={"kind": "timeout"}).json()] == ["timeout"]
    assert client.get("/api/v1/crashes", params={"kind": "cuda_illegal_memory_access"}).json() == []
    refused = client.get("/api/v1/crashes", params={"kind": "segv"})
    assert refused.status_code == 422 and "timeout" in refused.json()["detail"][0]["msg"]


@pytest.mark.parametrize(
    "path", ["/api/v1/results", "/api/v1/results.csv", "/api/v1/crashes", "/api/v1/sweeps", "/api/v1/jobs", "/api/v1/workers"]
)
def test_an_unknown_query_parameter_is_422_naming_it_and_the_allowed_ones(client, path) -> None:
    response = client.get(path, params={"graph_downgarded": "true"})
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["query", "graph_downgarded"] and "allowed" in error["msg"]


def test_the_results_filter_lists_its_names_when_one_is_misspelt(client) -> None:
    msg = client.get("/api/v1/results", params={"graphmode": "NONE"}).json()["detail"][0]["msg"]
    for name in ("graph_mode", "resolved_graph_mode", "graph_downgraded", "draft_eager", "sweep_id", "limit"):
        assert name in msg
