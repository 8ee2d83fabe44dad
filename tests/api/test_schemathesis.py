"""Bad input from schemathesis: every operation of the OpenAPI spec, 200 generated requests each: no 5xx,
and every answer is one the document lists, in the shape it gives.

The app runs in-process (ASGI transport, no network) on SQLite, seeded with a registered worker and
build, a sweep, a result and a crash, so that generated ids and filters sometimes hit real rows.
Requests carry the bootstrap admin token, so writes get past authentication into the handlers;
the worker's own routes carry the seeded worker's credential and its id.

Hypothesis draws a new seed each run (``DRAFTBENCH_SCHEMATHESIS_SEED`` replays one); pytest's header
prints it, so a failure found once can be run again.
"""

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, seed, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance, status_code_conformance

from app.api.main import create_app
from app.config import Settings
from tests.conftest import AUTH, DATASET, SCHEMATHESIS_SEED, TOKEN
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body, upload_log

MAX_EXAMPLES = 200
CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]
WORKER: dict[str, object] = {}


def _seed(client: TestClient) -> None:
    """A worker with its build, a sweep of four jobs: one succeeded, one crashed with a log, two queued."""
    worker = register_worker(client)
    WORKER.update(id=worker.id, headers=worker.headers)
    response = submit(client, sweep_body(DATASET))
    assert response.status_code == 201, response.text
    done = claim(client, worker)
    assert complete(client, done["job_id"], worker, {"result": cell_result(), "exit_code": 0}).status_code == 200
    crashed = claim(client, worker)
    log = "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nRuntimeError: boom\n"
    upload_log(client, crashed["job_id"], worker, log)
    assert complete(client, crashed["job_id"], worker, {"exit_code": 1, "duration_s": 3}).status_code == 200


# The schema must exist when pytest collects the module (one test per operation), so the app is built
# here, over a database in a temporary folder; the module fixture seeds it and removes the folder.
# (schemathesis.pytest.from_fixture would defer this, but its subtests break on pytest 9.)
_FOLDER = tempfile.TemporaryDirectory(prefix="draftbench-schemathesis-")
APP = create_app(
    # No rate limit: 429s would stop requests before the handlers they are meant to reach.
    Settings(database_url=f"sqlite:///{Path(_FOLDER.name) / 'draftbench.db'}", token=TOKEN, rate_limit_per_minute=0,
             failed_auth_per_minute=0)
)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@pytest.fixture(scope="module", autouse=True)
def seeded() -> Iterator[FastAPI]:
    with TestClient(APP) as client:
        _seed(client)
    yield APP
    APP.state.engine.dispose()
    _FOLDER.cleanup()


def test_every_operation_is_in_the_run() -> None:
    """The spec lists the whole API (a router dropped from it would silently escape the fuzzing)."""
    labels = {result.ok().label for result in schema.get_all_operations()}
    for expected in (
        "POST /api/v1/sweeps", "GET /api/v1/sweeps/{sweep_id}", "POST /api/v1/workers/{worker_id}/claim",
        "POST /api/v1/jobs/{job_id}/complete", "PUT /api/v1/jobs/{job_id}/log", "GET /api/v1/results",
        "GET /api/v1/crashes/{signature}",
    ):
        assert expected in labels, sorted(labels)


@schema.parametrize()
@seed(SCHEMATHESIS_SEED)
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate, Phase.target],
    database=None,
)
def test_no_server_error_and_every_answer_is_documented(case) -> None:
    headers = AUTH
    if case.path.startswith(("/api/v1/workers/{worker_id}/", "/api/v1/jobs/{job_id}/complete")) or (
        case.path == "/api/v1/jobs/{job_id}/log" and case.method == "PUT"
    ):
        headers = WORKER["headers"]
        if "worker_id" in (case.path_parameters or {}):
            case.path_parameters["worker_id"] = WORKER["id"]
    case.call_and_validate(headers=headers, checks=CHECKS)


# --- the 5xx schemathesis and the load benchmark found, pinned on SQLite and PostgreSQL ---------


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/jobs/99999999999999999999",
        "/api/v1/sweeps/-99999999999999999999",
        "/api/v1/jobs?offset=99999999999999999999",
        "/api/v1/sweeps?offset=99999999999999999999",
        "/api/v1/crashes?offset=99999999999999999999",
    ],
)
def test_integers_beyond_64_bits_are_refused_not_a_server_error(client: TestClient, path: str) -> None:
    # SQLite's driver raises OverflowError, PostgreSQL compares as numeric (404) or refuses (DataError).
    assert client.get(path).status_code in (404, 422)


@pytest.mark.parametrize(
    "spec",
    [
        {"num_drafts": 20, "num_draft_tokens": 0, "num_accepted_tokens": 0},
        {"num_drafts": 20, "num_draft_tokens": 60, "num_accepted_tokens": 61},
        {"num_drafts": 20, "num_draft_tokens": 60, "num_accepted_tokens": 30, "accepted_per_position": [21, 9, 0]},
    ],
)
def test_inconsistent_spec_counters_are_422_and_the_job_stays_held(client: TestClient, dataset: Path, spec: dict) -> None:
    worker = register_worker(client)
    assert submit(client, sweep_body(dataset, repeats=1)).status_code == 201
    job = claim(client, worker)
    refused = complete(client, job["job_id"], worker, {"result": cell_result() | {"spec_decode": spec}, "exit_code": 0})
    assert refused.status_code == 422, refused.text
    accepted = complete(client, job["job_id"], worker, {"result": cell_result(), "exit_code": 0})
    assert accepted.status_code == 200 and accepted.json()["state"] == "succeeded"
