"""No input reaches a 500: values JSON and the database cannot hold, bodies that are not UTF-8, repeated bad tokens."""

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.exc import DataError

from app import db
from app.api import handlers
from app.api.main import create_app
from app.config import Settings
from app.models import ApiToken, Sweep, Worker
from tests.conftest import AUTH, TOKEN
from tests.factories import register_worker, sweep_body

SURROGATE = "\udc80"


def _json(value: object) -> bytes:
    """JSON as a hostile client sends it: NaN and Infinity literals, lone surrogates as \\u escapes."""
    return json.dumps(value, ensure_ascii=True, allow_nan=True).encode()


def _count(client: TestClient, model: type) -> int:
    with client.app.state.sessionmaker() as session:
        return session.scalar(select(func.count()).select_from(model))


@pytest.mark.parametrize(
    ("change", "loc"),
    [({"workload": {"dataset": "draftbench", "temperature": float("nan")}}, ["body", "workload", "temperature"]),
     ({"timeout_s": float("inf")}, ["body", "timeout_s"]),
     ({"engine_args": {"gpu_memory_utilization": float("nan")}}, ["body", "engine_args"]),
     ({"name": SURROGATE}, ["body", "name"]),
     ({"tags": ["ok", SURROGATE]}, ["body", "tags", 1]),
     ({"branch": "a" + SURROGATE}, ["body", "branch"]),
     ({"reason": SURROGATE}, ["body", "reason"]),
     ({"submitted_by": SURROGATE}, ["body", "submitted_by"])],
    ids=["nan-temperature", "inf-timeout", "nan-in-engine-args", "surrogate-name", "surrogate-tag", "surrogate-branch",
         "surrogate-reason", "surrogate-submitter"],
)
def test_values_json_or_the_database_cannot_hold_are_422_naming_the_field(client, dataset, change, loc) -> None:
    register_worker(client)
    body = sweep_body(dataset) | change
    response = client.post("/api/v1/sweeps", content=_json(body), headers=AUTH | {"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][: len(loc)] == loc
    assert _count(client, Sweep) == 0


def test_a_surrogate_in_a_worker_or_token_name_is_422(client) -> None:
    worker = {"name": SURROGATE, "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "b"}]}
    refused = client.post("/api/v1/workers", content=_json(worker), headers=AUTH | {"content-type": "application/json"})
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "name"]
    token = {"name": "ci" + SURROGATE, "scopes": ["submit"]}
    refused = client.post("/api/v1/tokens", content=_json(token), headers=AUTH | {"content-type": "application/json"})
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "name"]
    assert _count(client, Worker) == 0 and _count(client, ApiToken) == 0


def test_a_body_that_is_not_utf8_json_is_422_on_every_route(client) -> None:
    worker = register_worker(client)
    for path, headers in (("/api/v1/workers", AUTH), ("/api/v1/tokens", AUTH),
                          (f"/api/v1/workers/{worker.id}/heartbeat", worker.headers)):
        response = client.post(path, content=b"\xff\xfe\x00{", headers=headers | {"content-type": "application/json"})
        assert response.status_code == 422, (path, response.text)
        assert response.json()["detail"][0]["loc"][0] == "body"


@pytest.mark.parametrize("path", ["/api/v1/sweeps", "/api/v1/tokens"])
def test_json_in_utf16_is_422_naming_the_body_not_read(client, dataset, path) -> None:
    # Before: Python's JSON reader guessed UTF-16 from the bytes, so a body the docs refuse (not UTF-8) made a sweep.
    body = sweep_body(dataset) if path.endswith("sweeps") else {"name": "x", "scopes": ["submit"]}
    response = client.post(path, content=json.dumps(body).encode("utf-16"), headers=AUTH | {"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body"] and "utf-8" in response.json()["detail"][0]["msg"].lower()
    assert client.get("/api/v1/sweeps").json() == [] and client.get("/api/v1/tokens", headers=AUTH).json() == []


def test_json_nested_past_pythons_recursion_limit_is_422_not_400(client) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    response = client.post("/api/v1/workers", content=deep, headers=AUTH | {"content-type": "application/json"})
    assert response.status_code == 422, response.text


def test_guessing_tokens_is_rate_limited_per_client(make_client) -> None:
    limited = make_client(failed_auth_per_minute=5)
    wrong = {"Authorization": "Bearer dbk_guess"}
    answers = [limited.post("/api/v1/sweeps", json={}, headers=wrong).status_code for _ in range(7)]
    assert answers[:5] == [401] * 5 and answers[5:] == [429, 429]
    refused = limited.post("/api/v1/sweeps", json={}, headers=wrong)
    assert "Retry-After" in refused.headers


NUL = "\x00"


def _worker_with(**build: str) -> dict:
    return {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "b", **build}]}


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [("/api/v1/workers", _worker_with() | {"host": "gpu" + NUL}, ["body", "host"]),
     ("/api/v1/workers", _worker_with() | {"name": NUL}, ["body", "name"]),
     ("/api/v1/workers", _worker_with(base="vllm-0.32" + NUL), ["body", "builds", 0, "base"]),
     ("/api/v1/workers", _worker_with(source="fix.diff" + NUL), ["body", "builds", 0, "source"]),
     ("/api/v1/workers", _worker_with(commit=NUL), ["body", "builds", 0, "commit"]),
     ("/api/v1/tokens", {"name": "ci" + NUL, "scopes": ["submit"]}, ["body", "name"])],
    ids=["worker-host", "worker-name", "build-base", "build-source", "build-commit", "token-name"],
)
def test_a_nul_in_a_name_or_a_build_fact_is_422_naming_the_field(client, path, body, loc) -> None:
    response = client.post(path, json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == loc
    assert _count(client, Worker) == 0 and _count(client, ApiToken) == 0


@pytest.mark.parametrize(
    ("change", "loc"),
    [({"name": "nightly" + NUL}, ["body", "name"]),
     ({"tags": ["ok", "t" + NUL]}, ["body", "tags", 1]),
     ({"reason": "why" + NUL}, ["body", "reason"]),
     ({"branch": NUL}, ["body", "branch"]),
     ({"submitted_by": NUL}, ["body", "submitted_by"]),
     ({"model": "/models/" + NUL}, ["body", "model"]),
     ({"engine_args": {"max_num_seqs": 4, "dtype": "half" + NUL}}, ["body", "engine_args"]),
     ({"pull_request": 2**40}, ["body", "pull_request"]),
     ({"speculative": [{"method": "ngram", "num_speculative_tokens": 2, "rejection_sample_method": "synthetic",
                        "synthetic_acceptance_rates": [0.9, 1e308]}]}, ["body", "speculative", 0])],
    ids=["name", "tag", "reason", "branch", "submitter", "model", "engine-arg", "pull-request-past-32-bits",
         "acceptance-rate-past-1"],
)
def test_a_sweep_the_database_cannot_hold_is_422_naming_the_field(client, dataset, change, loc) -> None:
    register_worker(client)
    response = client.post("/api/v1/sweeps", json=sweep_body(dataset) | change, headers=AUTH)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][: len(loc)] == loc
    assert _count(client, Sweep) == 0


def test_a_heartbeat_for_a_job_id_past_64_bits_is_422_naming_it(client) -> None:
    worker = register_worker(client)
    response = client.post(f"/api/v1/workers/{worker.id}/heartbeat", json={"job_ids": [1, 2**70]}, headers=worker.headers)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body", "job_ids", 1]


@pytest.mark.parametrize(
    ("columns", "loc", "msg"),
    [({"host": "h" * 300}, ["request", "workers", "host"], "workers.host holds at most 255 characters, not 300"),
     ({"name": "w" + NUL}, ["request", "workers", "name"], "workers.name cannot hold a NUL character"),
     ({"gpu_count": 2**40}, ["request", "workers", "gpu_count"], "workers.gpu_count holds integers of 32 bits")],
    ids=["too-long", "nul", "past-32-bits"],
)
def test_a_write_postgresql_refuses_is_answered_naming_its_column(pg_url, columns, loc, msg) -> None:
    # What validation should have caught (app.schemas.text) and did not: the answer still names the column.
    db.upgrade(pg_url)
    engine = db.make_engine(pg_url)
    try:
        with db.make_sessionmaker(engine)() as session:
            session.add(Worker(**({"name": "w", "host": "h", "gpu_kinds": [], "builds": []} | columns)))
            with pytest.raises(DataError) as refused:
                session.flush()
    finally:
        engine.dispose()
    answer = handlers.database_refusal(refused.value)
    assert answer["loc"] == loc and answer["msg"].startswith(msg)


@pytest.mark.parametrize(
    ("path", "loc"),
    [("/api/v1/results?build=vllm%00", ["query", "build"]), ("/api/v1/crashes/abc%00", ["path", "signature"])],
    ids=["query", "path"],
)
def test_a_nul_in_a_filter_postgresql_cannot_compare_is_answered_naming_it(pg_url, path, loc) -> None:
    app = create_app(Settings(database_url=pg_url, token=TOKEN))
    try:
        with TestClient(app) as client:
            response = client.get(path)
    finally:
        app.state.engine.dispose()
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == loc


def test_an_overflow_in_the_driver_is_the_inputs_and_one_in_our_arithmetic_is_a_fault(tmp_path) -> None:
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'overflow.db'}", token=TOKEN))

    def past_64_bits() -> None:
        with db.make_sessionmaker(app.state.engine)() as session:
            session.get(Sweep, 2**64)  # sqlite3 cannot bind it: OverflowError inside SQLAlchemy's execute

    def our_arithmetic() -> None:
        2.0**5000  # noqa: B018 (the fault under test)

    app.add_api_route("/driver", past_64_bits)
    app.add_api_route("/arithmetic", our_arithmetic)
    with TestClient(app, raise_server_exceptions=False) as client:
        refused = client.get("/driver")
        assert refused.status_code == 422 and "out of the range the database stores" in refused.text
        assert client.get("/arithmetic").status_code == 500


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"])
def test_a_sweep_in_another_content_type_is_422_naming_the_header_and_the_allowed_ones(client, dataset, content_type) -> None:
    # Before: any type but YAML's was read as JSON, so a text/plain body (which a browser's form may send) made a sweep.
    response = client.post("/api/v1/sweeps", content=json.dumps(sweep_body(dataset)).encode(),
                           headers=AUTH | {"content-type": content_type})
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["header", "content-type"]
    assert "application/json" in error["msg"] and "application/yaml" in error["msg"]
    assert client.get("/api/v1/sweeps").json() == []
