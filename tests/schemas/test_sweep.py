"""A sweep's axes list each value once, and k is an integer: what once ran a cell twice, or took true for k=1."""

import pytest
from sqlalchemy import func, select

from app.models import Job
from app.schemas.sweep import SweepSpec
from tests.factories import register_worker, submit, sweep_body

NGRAM = {"method": "ngram", "num_speculative_tokens": 3}

REPEATS = [
    ({"backends": ["CPU_ATTN", "CPU_ATTN"]}, ["backends"], "CPU_ATTN given twice"),
    ({"attention_backends": ["CPU_ATTN", "CPU_ATTN"]}, ["attention_backends"], "CPU_ATTN given twice"),
    ({"graph_modes": ["NONE", "FULL", "NONE"]}, ["graph_modes"], "NONE given twice"),
    ({"gpu_kinds": ["cpu", "H200", "cpu", "H200"]}, ["gpu_kinds"], "cpu, H200 given twice"),
    ({"mode": "serve", "concurrency": [1, 4, 1]}, ["concurrency"], "1 given twice"),
    ({"env": {"VLLM_USE_V2_MODEL_RUNNER": ["0", "1", "0"]}}, ["env", "VLLM_USE_V2_MODEL_RUNNER"], "0 given twice"),
]


@pytest.mark.parametrize(("change", "loc", "fragment"), REPEATS, ids=[str(loc[-1]) for _, loc, _ in REPEATS])
def test_an_axis_listing_a_value_twice_is_422_naming_it(client, dataset, change, loc, fragment) -> None:
    # Before: 201, and each repeated value made its cells twice (two jobs of one config hash), each run and paid for.
    register_worker(client, gpu_kinds=["cpu", "H200"])
    body = sweep_body(dataset) | change
    if "attention_backends" in change:
        del body["backends"]
    response = submit(client, body)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", *loc] and error["msg"] == f"must list each value once; {fragment}", error
    with client.app.state.sessionmaker() as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 0


@pytest.mark.parametrize("k", [True, "2", 2.0, [True, 2], ["2", 3], [1, 2.0]],
                         ids=["true", "text", "float", "true-in-axis", "text-in-axis", "float-in-axis"])
def test_k_is_an_integer_never_a_bool_text_or_float(client, dataset, k) -> None:
    # Before: true ran as k=1, "2" and 2.0 as 2.
    register_worker(client)
    response = submit(client, sweep_body(dataset, speculative=[{**NGRAM, "num_speculative_tokens": k}]))
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "speculative", 0, "num_speculative_tokens"], error
    assert error["msg"].startswith("must be an integer from 1 to 64"), error


def test_the_schema_tells_clients_an_axis_takes_each_value_once() -> None:
    properties = SweepSpec.model_json_schema()["properties"]
    assert all(properties[name]["uniqueItems"] for name in ("backends", "graph_modes", "gpu_kinds", "concurrency"))
    assert properties["env"]["additionalProperties"]["uniqueItems"]
