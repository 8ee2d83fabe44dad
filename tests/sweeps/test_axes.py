"""The serving and environment axes: how they expand, and what a sweep may set."""

import pytest

from app.schemas.sweep import SweepSpec
from app.sweeps import matrix
from tests.conftest import AUTH
from tests.factories import register_worker, submit, sweep_body


def _spec(**overrides) -> SweepSpec:
    return SweepSpec.model_validate(sweep_body("draftbench", repeats=1, **overrides))


def test_env_values_and_client_counts_multiply_the_cells() -> None:
    cells = matrix.expand(_spec(mode="serve", concurrency=[1, 4, 16], env={"VLLM_USE_V2_MODEL_RUNNER": ["0", "1"]}))
    assert len(cells) == 2 * 2 * 3  # two drafts x two runners x three client counts
    seen = {(c.method, c.spec.env["VLLM_USE_V2_MODEL_RUNNER"], c.spec.concurrency) for c in cells}
    assert len(seen) == 12 and all(c.spec.mode == "serve" for c in cells)


def test_serving_without_client_counts_runs_one_client_and_offline_runs_none() -> None:
    assert {c.spec.concurrency for c in matrix.expand(_spec(mode="serve"))} == {1}
    assert {c.spec.concurrency for c in matrix.expand(_spec())} == {None}
    assert matrix.env_combinations({"B": ["x"], "A": ["0", "1"]}) == [{"A": "0", "B": "x"}, {"A": "1", "B": "x"}]
    assert matrix.env_combinations({}) == [{}]


@pytest.mark.parametrize(
    ("change", "loc", "fragment"),
    [({"concurrency": [4]}, ["body"], "axis of mode 'serve'"),
     ({"mode": "serve", "concurrency": [0]}, ["body", "concurrency", 0], "greater than or equal to 1"),
     ({"env": {"LD_PRELOAD": ["/tmp/evil.so"]}}, ["body", "env", "LD_PRELOAD"], "VLLM_USE_V2_MODEL_RUNNER"),
     ({"env": {"VLLM_USE_V2_MODEL_RUNNER": ["1; reboot"]}}, ["body", "env", "VLLM_USE_V2_MODEL_RUNNER", 0], "may contain only"),
     ({"env": {"VLLM_USE_V2_MODEL_RUNNER": []}}, ["body", "env", "VLLM_USE_V2_MODEL_RUNNER"], "at least 1"),
     ({"mode": "online"}, ["body", "mode"], "'offline' or 'serve'")],
)
def test_bad_axes_are_422_naming_the_field(client, dataset, change, loc, fragment) -> None:
    register_worker(client)
    response = submit(client, sweep_body(dataset, **change))
    assert response.status_code == 422, response.text
    error = response.json()["detail"][0]
    assert error["loc"] == loc and fragment in error["msg"], error


def test_jobs_carry_their_mode_clients_and_env(client, dataset) -> None:
    register_worker(client)
    body = sweep_body(dataset, repeats=1, mode="serve", concurrency=[1, 16], env={"VLLM_BATCH_INVARIANT": ["1"]},
                      speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    sweep = submit(client, body).json()
    jobs = client.get("/api/v1/jobs", params={"sweep_id": sweep["id"]}, headers=AUTH).json()
    assert sorted((j["spec"]["concurrency"], j["spec"]["env"]["VLLM_BATCH_INVARIANT"]) for j in jobs) == [(1, "1"), (16, "1")]
    statuses = sweep["jobs"]
    assert sorted(j["concurrency"] for j in statuses) == [1, 16] and {j["mode"] for j in statuses} == {"serve"}
