"""Ids a request names, bounded by what the id columns hold: both databases answer one 422 naming the parameter."""

import pytest
from sqlalchemy import BigInteger, Integer

from app.models import Base
from app.schemas.ids import MAX_ID
from tests.conftest import AUTH
from tests.factories import register_worker, sweep_body

PAST = MAX_ID + 1  # 2**31: PostgreSQL's Integer cannot hold it, SQLite's can


def test_max_id_is_what_every_id_column_holds() -> None:
    """One source of truth: should an id column become BigInteger, MAX_ID must move with it (and this fails)."""
    kinds = {type(column.type) for table in Base.metadata.tables.values() for column in table.primary_key.columns
             if column.name == "id"}
    assert kinds == {Integer} and not issubclass(Integer, BigInteger)
    assert MAX_ID == 2**31 - 1


READS = [
    (f"/api/v1/sweeps/{PAST}", ["path", "sweep_id"]),
    (f"/api/v1/jobs/{PAST}", ["path", "job_id"]),
    (f"/api/v1/jobs/{PAST}/log", ["path", "job_id"]),
    (f"/api/v1/bisections/{PAST}", ["path", "bisection_id"]),
    (f"/api/v1/jobs?sweep_id={PAST}", ["query", "sweep_id"]),
    (f"/api/v1/results?sweep_id={PAST}", ["query", "sweep_id"]),
    (f"/api/v1/results.csv?sweep_id={PAST}", ["query", "sweep_id"]),
    (f"/api/v1/calibration-misses?sweep_id={PAST}", ["query", "sweep_id"]),
    (f"/api/v1/alarms?sweep_id={PAST}", ["query", "sweep_id"]),
    (f"/api/v1/alarms/counts?sweep_id={PAST}", ["query", "sweep_id"]),
    (f"/api/v1/alerts?sweep_id={PAST}", ["query", "sweep_id"]),
    (f"/api/v1/speedups?sweep_id={PAST}", ["query", "sweep_id"]),
    (f"/api/v1/parallel?sweep_id={PAST}", ["query", "sweep_id"]),
    (f"/api/v1/compare?base_sweep=1&head_sweep={PAST}", ["query", "head_sweep"]),
]


@pytest.mark.parametrize(("path", "loc"), READS, ids=[path.split("?")[0] + "?" * ("?" in path) for path, _ in READS])
def test_an_id_past_what_postgresql_stores_is_the_same_named_422_on_both_databases(client, path, loc) -> None:
    # Before: SQLite answered 404 or an empty list, PostgreSQL a 422 whose loc named only "request".
    response = client.get(path)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == loc and str(MAX_ID) in error["msg"], error


def test_the_largest_id_is_looked_up_like_any_other(client) -> None:
    assert client.get(f"/api/v1/sweeps/{MAX_ID}").status_code == 404
    assert client.get(f"/api/v1/jobs/{MAX_ID}").status_code == 404
    assert client.get("/api/v1/jobs", params={"sweep_id": MAX_ID}).json() == []


@pytest.mark.parametrize(
    ("method", "path", "body", "loc"),
    [("POST", f"/api/v1/sweeps/{PAST}/cancel", None, ["path", "sweep_id"]),
     ("POST", f"/api/v1/sweeps/{PAST}/more", {"cells": [{"cell_index": 0, "pairs": 1}]}, ["path", "sweep_id"]),
     ("DELETE", f"/api/v1/tokens/{PAST}", None, ["path", "token_id"]),
     ("POST", f"/api/v1/bisections/{PAST}/steps", {"sweep_id": 1, "against_sweep_id": 2}, ["path", "bisection_id"]),
     ("POST", "/api/v1/bisections/1/steps", {"sweep_id": 1, "against_sweep_id": PAST}, ["body", "against_sweep_id"])],
    ids=["cancel", "more", "revoke", "bisection-path", "bisection-step-body"],
)
def test_a_write_naming_an_id_past_the_columns_is_422_naming_it(client, method, path, body, loc) -> None:
    response = client.request(method, path, json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == loc


def test_a_heartbeat_or_a_pairing_past_the_columns_is_422_naming_the_field(client, dataset) -> None:
    worker = register_worker(client)
    beat = client.post(f"/api/v1/workers/{worker.id}/heartbeat", json={"job_ids": [1, PAST]}, headers=worker.headers)
    assert beat.status_code == 422 and beat.json()["detail"][0]["loc"] == ["body", "job_ids", 1], beat.text
    assert str(MAX_ID) in beat.json()["detail"][0]["msg"]
    other = client.post(f"/api/v1/workers/{PAST}/heartbeat", json={"job_ids": []}, headers=worker.headers)
    assert other.status_code == 422 and other.json()["detail"][0]["loc"] == ["path", "worker_id"], other.text
    paired = client.post("/api/v1/sweeps", json=sweep_body(dataset, paired_with=PAST), headers=AUTH)
    assert paired.status_code == 422 and paired.json()["detail"][0]["loc"] == ["body", "paired_with"], paired.text
