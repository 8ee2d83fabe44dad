"""Per-request counts as a worker reports them become a result's ``request_acceptance`` (SQLite and PostgreSQL):
``GET /api/v1/results`` and its CSV show acceptance by prompt category and the histogram of per-request rates,
an older result shows none ("not recorded", not zeros), a sweep's export imports back with them, and requests that
do not add up to the run's counters are a counter problem."""

import csv
import io
import json
from pathlib import Path

from fastapi.testclient import TestClient

from app import db
from app.results import counters
from app.sweeps import exports
from app.sweeps.imports import import_sweep
from runners.folders import read_folder, write_runs
from tests.dashboards.test_pages import tables
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body

# cell_result's counters: 20 drafts, 60 draft tokens, 30 accepted, per position [15, 10, 5]. Four requests add up to
# them: two "qa" ones at 10/15 and 10/15 accepted, two "coding" ones at 5/15 and 5/15.
REQUESTS = [
    {"num_output_tokens": 100, "fingerprint": "a", "category": "qa", "num_drafts": 5, "num_draft_tokens": 15,
     "num_accepted_tokens": 10, "accepted_per_position": [5, 3, 2]},
    {"num_output_tokens": 100, "fingerprint": "b", "category": "qa", "num_drafts": 5, "num_draft_tokens": 15,
     "num_accepted_tokens": 10, "accepted_per_position": [5, 3, 2]},
    {"num_output_tokens": 100, "fingerprint": "c", "category": "coding", "num_drafts": 5, "num_draft_tokens": 15,
     "num_accepted_tokens": 5, "accepted_per_position": [3, 2, 0]},
    {"num_output_tokens": 100, "fingerprint": "d", "category": "coding", "num_drafts": 5, "num_draft_tokens": 15,
     "num_accepted_tokens": 5, "accepted_per_position": [2, 2, 1]},
]


def _sweep(client: TestClient, dataset, bodies: list[dict]) -> int:
    worker = register_worker(client)
    sweep = submit(client, sweep_body(dataset, repeats=len(bodies), speculative=[{"method": "ngram", "num_speculative_tokens": 3}])).json()
    for body in bodies:
        job = claim(client, worker)
        assert complete(client, job["job_id"], worker, {"result": body, "exit_code": 0}).status_code == 200
    return sweep["id"]


def test_a_results_requests_show_by_category_and_an_older_result_shows_not_recorded(client: TestClient, dataset) -> None:
    recorded = cell_result(fingerprints="abcd") | {"schema_version": 7, "requests": REQUESTS}
    sweep_id = _sweep(client, dataset, [recorded, cell_result()])
    new, old = client.get("/api/v1/results", params={"sweep_id": sweep_id}).json()
    assert old["requests"] is None
    by_name = {c["category"]: c for c in new["requests"]["categories"]}
    assert sorted(by_name) == ["coding", "qa"]
    # qa: 20 of 30 draft tokens, two requests at exactly 2/3: no spread between them, so Wilson's interval stands.
    assert (by_name["qa"]["requests"], by_name["qa"]["accepted"], by_name["qa"]["draft_tokens"]) == (2, 20, 30)
    assert by_name["qa"]["rate"] == 20 / 30 and by_name["qa"]["length"] == 1 + 20 / 10
    assert by_name["qa"]["rate_low"] < 20 / 30 < by_name["qa"]["rate_high"]
    # Rates 2/3, 2/3, 1/3, 1/3: bins [0.6, 0.7) and [0.3, 0.4).
    assert new["requests"]["rate_bins"] == [0, 0, 0, 2, 0, 0, 2, 0, 0, 0] and new["requests"]["no_drafts"] == 0
    assert new["counter_problems"] == []
    rows = list(csv.DictReader(io.StringIO(client.get("/api/v1/results.csv", params={"sweep_id": sweep_id}).text)))
    assert json.loads(rows[0]["requests"])["categories"][0]["category"] == "coding" and rows[1]["requests"] == ""


def test_requests_that_do_not_add_up_to_the_runs_counters_are_a_counter_problem(client: TestClient, dataset) -> None:
    lost = cell_result(fingerprints="abc") | {"schema_version": 7, "requests": REQUESTS[:3]}
    sweep_id = _sweep(client, dataset, [lost])
    [row] = client.get("/api/v1/results", params={"sweep_id": sweep_id}).json()
    assert row["counter_problems"] == [
        "requests count 15 drafts in all, the run's counters 20",
        "requests count 45 draft tokens in all, the run's counters 60",
        "requests count 25 accepted tokens in all, the run's counters 30",
        "requests accepted [13, 8, 4] per position in all, the run's counters [15, 10, 5]",
    ]
    with client.app.state.sessionmaker() as session:
        [found] = counters.of_sweep(session=session, sweep_id=sweep_id)
    assert found.problems == row["counter_problems"]


def test_bad_filters_are_refused_naming_the_field_and_its_values(client: TestClient) -> None:
    response = client.get("/api/v1/results", params={"method": "ngramm"})
    assert response.status_code == 422
    assert "method" in response.text and "draft_model" in response.text and "eagle3" in response.text


def test_an_exported_sweep_imports_back_with_its_requests_by_category(client: TestClient, dataset, tmp_path: Path) -> None:
    sweep_id = _sweep(client, dataset, [cell_result(fingerprints="abcd") | {"schema_version": 7, "requests": REQUESTS}])
    with client.app.state.sessionmaker() as session:
        done = exports.export(session=session, sweep=exports.find(session=session, ref=str(sweep_id)))
        write_runs(done.spec, tmp_path / "out", done.ran, done.cut_logs, done.layout)
    found = read_folder(tmp_path / "out")
    with client.app.state.sessionmaker.begin() as session:
        # Into its own database the run is stored already: nothing is added.
        imported = import_sweep(session=session, spec=found.spec, ran=found.ran, digest=found.digest)
        again, created = imported.sweep, imported.created
        assert (again.id, created) == (sweep_id, False)
    target = f"sqlite:///{tmp_path / 'imported.db'}"
    db.upgrade(target)
    engine = db.make_engine(target)
    try:
        with db.make_sessionmaker(engine).begin() as session:
            imported = import_sweep(session=session, spec=found.spec, ran=found.ran, digest=found.digest)
            sweep, created = imported.sweep, imported.created
            assert created
            [job] = sweep.jobs
            stored = job.result.request_acceptance
    finally:
        engine.dispose()
    assert sorted(stored["categories"]) == ["coding", "qa"] and stored["categories"]["qa"][:4] == [2, 10, 30, 20]


def test_the_matrix_lists_each_category_with_its_interval_and_an_older_start_as_not_recorded(client: TestClient, dataset) -> None:
    recorded = cell_result(fingerprints="abcd") | {"schema_version": 7, "requests": REQUESTS}
    sweep_id = _sweep(client, dataset, [recorded, cell_result()])
    found = tables(client.get("/matrix", params={"sweep_id": sweep_id}).text)["categories"]
    rows = [cells for _, cells in found[1:]]
    # Two starts pooled, one of them recorded: its two qa requests, 20 of 30 draft tokens.
    [qa] = [cells for cells in rows if cells[4] == "qa"]
    assert qa[5:7] == ["2", "20 / 30"] and qa[7].startswith("0.667 [") and qa[9] == "1 of 2"
    assert sorted(cells[4] for cells in rows) == ["coding", "qa"]
    # Every build recent: the category table waits for a sweep or a build to be picked.
    page = client.get("/matrix").text
    assert 'id="by-category-pick"' in page and 'id="categories"' not in page


def test_a_cell_whose_starts_recorded_no_requests_reads_not_recorded(client: TestClient, dataset) -> None:
    sweep_id = _sweep(client, dataset, [cell_result()])
    [_, (_, row)] = tables(client.get("/matrix", params={"sweep_id": sweep_id}).text)["categories"]
    assert row[1].startswith("ngram") and row[4].startswith("not recorded") and "0" not in row[4:]
