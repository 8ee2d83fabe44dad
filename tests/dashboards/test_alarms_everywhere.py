"""The graph-capture alarm, calibration misses and open regressions over everything stored, where a reader looks: the
overview, ``/alarms``, the API, a sweep's page, ``draftbench status`` and the compare API and page.

Over every H200 folder imported: the capture-bug sweep is older than ten others, and its build's alarm (FLASHINFER
FULL_DECODE_ONLY accepting 0.910 against 1.000 eager, -9.0 points [-9.4, -8.6]) was hidden behind them. The H200
matrix's self-drafts (everything accepted) and random DFlash drafts (nothing accepted) cannot show a capture bug.
"""

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.config import Settings
from tests import scratchdb
from tests.conftest import PG_ADMIN_URL, TOKEN
from tests.dashboards.h200 import imported
from tests.factories import cell_result, claim, complete, register_worker, run_history, submit, sweep_body
from tests.live import serve

ROOT = Path(__file__).resolve().parents[2]
BUG = ("FLASHINFER FULL_DECODE_ONLY (draft_model k=3, vllm-0.26.0-fi-full): acceptance 0.910 against 1.000 eager on FLASHINFER, "
       "-9.0 points [-9.4, -8.6]")
# Of the 35 graphed cells with drafts stored: the 2 capture-bug cells, the 8B-shape draft's 2, 18 degenerate ones
# (the matrix's and the fallback repeats'), and 13 whose sweep ran no eager sibling (serving, calibration, peers).
EVERYTHING = {"scope": "every build", "alarmed": 2, "within": 2, "cannot_show": 18, "unpaired": 13, "judged": 22,
              "within_by_reason": {"within_interval": 2, "below_min_effect": 0, "unknown": 0}}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stored(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A database with every H200 folder imported, as a user imports them."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('everything') / 'h200.db'}"
        imported(url)
        yield url
    else:
        with scratchdb.postgres(PG_ADMIN_URL) as url:
            imported(url)
            yield url


@pytest.fixture(scope="module")
def h200(stored: str) -> Iterator[TestClient]:
    app = create_app(Settings(database_url=stored, token=TOKEN))
    with TestClient(app) as client:
        yield client
    app.state.engine.dispose()


def _text(html: str) -> str:
    """What a reader sees of a page: its text, tags out, whitespace folded."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace(" ,", ",")


def _status(url: str, sweep_id: int) -> str:
    """``draftbench status SWEEP_ID`` against a service over ``url``, as a user runs it (this checkout's code), its
    output with whitespace folded."""
    with serve(Settings(database_url=url, token=TOKEN)) as server:
        done = subprocess.run([sys.executable, "-m", "app.cli", "status", str(sweep_id), "--server", server], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.split())


def _sweep(client: TestClient, name: str) -> int:
    return next(s["id"] for s in client.get("/api/v1/sweeps").json() if s["name"] == name)


def test_the_overview_shows_every_builds_alarm_and_what_cannot_show_one(h200: TestClient) -> None:
    text = _text(h200.get("/").text)
    assert BUG in text
    # The stored judgement keeps what spared each cell not flagged: the 8B-shape draft's two held within their interval.
    assert "35 graphed cells with drafts in every stored build: 2 alarmed, 2 within the interval of their eager sibling, " \
           "18 cannot show a capture bug" in text


def test_alarms_page_and_api_read_every_build_without_a_filter(h200: TestClient) -> None:
    text = _text(h200.get("/alarms").text)
    assert BUG in text and "18 cannot show" in text
    assert "2 alarm(s) among the 4 graphed cells that could show a capture bug (22 judged against an eager sibling, 18 of " \
           "them with acceptance exactly 0 or 1, which cannot)" in text
    api = h200.get("/api/v1/alarms").json()
    assert [(a["build"], a["graph_mode"]) for a in api] == [("vllm-0.26.0-fi-full", "FULL_DECODE_ONLY"),
                                                             ("vllm-0.26.0-fi-full", "FULL_AND_PIECEWISE")]
    assert api[0]["sentence"] == BUG and (api[0]["successes"], api[0]["trials"]) == (17852, 19620)
    assert h200.get("/api/v1/alarms/counts").json() == EVERYTHING


def test_a_larger_minimum_effect_says_the_cells_it_spares_moved_beyond_their_interval_not_within_it(h200: TestClient) -> None:
    """At 50 points the capture bug's -9.0 [-9.4, -8.6] is no alarm, but its interval still excludes 0: "within the
    interval of their eager sibling" would be false of it. The page judges anew and tells the two apart."""
    text = _text(h200.get("/alarms", params={"min_effect": 0.5}).text)
    assert "2 alarmed" not in text and "4 within" not in text
    assert "0 alarmed, 2 within the interval of their eager sibling, 2 below the minimum effect (their interval excludes 0, " \
           "but they moved less than 50 points), 18 cannot show a capture bug" in text
    assert "No alarm in every stored build: 4 of the 22 graphed cells judged against an eager sibling could show a capture bug" in text
    # Judged anew at an effect below the bug's: the same alarms as stored, and nothing spared is said to be outside.
    again = _text(h200.get("/alarms", params={"min_effect": 0.05}).text)
    # (Judged over every build's cells at once, the label tells the config apart from the rest of them.)
    assert "acceptance 0.910 against 1.000 eager on FLASHINFER, -9.0 points [-9.4, -8.6]" in again
    assert "2 alarmed, 2 within the interval of their eager sibling, 18 cannot show" in again


def test_the_matrix_of_degenerate_drafts_is_never_said_to_stay_within_its_interval(h200: TestClient) -> None:
    matrix = _sweep(h200, "h200-matrix")
    counts = h200.get("/api/v1/alarms/counts", params={"sweep_id": matrix}).json()
    assert (counts["within"], counts["cannot_show"], counts["alarmed"]) == (0, 18, 0)
    unpatched = _text(h200.get("/alarms", params={"build": "vllm-0.26.0"}).text)
    assert "No alarm in build vllm-0.26.0: 2 of the 20 graphed cells judged against an eager sibling could show a " \
           "capture bug" in unpatched and "18 cannot show" in unpatched and "2 within the interval" in unpatched
    assert "18 cannot show" in _text(h200.get(f"/sweeps/{matrix}").text)


def test_the_capture_bug_sweep_shows_its_alarm_on_its_page_and_in_status(h200: TestClient, stored: str) -> None:
    capture = _sweep(h200, "h200-capture-bug")
    page = _text(h200.get(f"/sweeps/{capture}").text)
    assert BUG in page and "2 graphed cells with drafts in this sweep: 2 alarmed" in page
    out = _status(stored, capture)
    assert ("graph-capture alarms: 2 of 2 graphed cells judged against their eager sibling (0 within their interval, 0 "
            "below the minimum effect, 0 judged before either was kept; 0 cannot show") in out
    assert f"alarm (acceptance): {BUG} (17852/19620 against 15360/15360)" in out
    assert "calibration misses: 0" in out and "open regressions of its cells: 0" in out


def test_comparing_the_patched_build_with_the_unpatched_one_shows_the_alarm(h200: TestClient) -> None:
    matrix, capture = _sweep(h200, "h200-matrix"), _sweep(h200, "h200-capture-bug")
    answer = h200.get("/api/v1/compare", params={"base_sweep": matrix, "head_sweep": capture}).json()
    assert answer["alarms"][0]["sentence"] == BUG and answer["base_alarms"] == []
    assert (answer["alarm_checks"]["alarmed"], answer["alarm_checks"]["cannot_show"]) == (2, 0)
    back = h200.get("/api/v1/compare", params={"base_sweep": capture, "head_sweep": matrix}).json()
    assert back["alarms"] == [] and back["base_alarms"][0]["sentence"] == BUG
    assert back["alarm_checks"]["cannot_show"] == 18
    html = h200.get("/compare", params={"base_build": "vllm-0.26.0", "head_build": "vllm-0.26.0-fi-full"}).text
    head = html[html.index('id="head-alarms"'):].split("</ul>")[0]
    assert BUG in _text(head)


def test_calibration_misses_over_every_result_on_the_overview_the_sweep_page_and_status(make_client, db_url: str, dataset) -> None:
    client = make_client()
    worker = register_worker(client, gpu_kinds=["H200"])
    synthetic = {"method": "draft_model", "model": "/m", "num_speculative_tokens": 3,
                 "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.8, 0.5, 0.3]}
    sweep = submit(client, sweep_body(dataset, gpu_kinds=["H200"], backends=["FLASH_ATTN"], repeats=1, speculative=[synthetic])).json()
    job = claim(client, worker)
    # 400 drafts: 280 at the first position is 0.70 [0.653, 0.743], which misses the 0.8 asked for.
    result = cell_result() | {"spec_decode": {"num_drafts": 400, "num_draft_tokens": 1200, "num_accepted_tokens": 600,
                                              "accepted_per_position": [280, 200, 120]}}
    assert complete(client, job["job_id"], worker, {"result": result, "exit_code": 0}).status_code == 200
    missed = f"job {job['job_id']} (sweep {sweep['id']}, vllm-test, H200 FLASH_ATTN NONE, draft_model): position 1 measured " \
             "0.700 [0.653, 0.743] against 0.800 asked (400 drafts)"
    answer = client.get("/api/v1/calibration-misses").json()
    assert answer["count"] == 1 and answer["misses"][0]["sentence"] == missed
    assert answer["misses"][0]["positions"] == [{"number": 1, "expected": 0.8, "measured": 0.7,
                                                  "measured_low": pytest.approx(0.6534, abs=1e-4),
                                                  "measured_high": pytest.approx(0.7429, abs=1e-4)}]
    assert missed in _text(client.get("/").text) and missed in _text(client.get(f"/sweeps/{sweep['id']}").text)
    out = _status(db_url, sweep["id"])
    assert f"calibration misses: 1 {missed}" in out


def test_an_open_regression_shows_on_its_sweeps_page_in_status_and_in_the_compare_api(make_client, db_url: str, dataset) -> None:
    client = make_client()
    run_history(client, dataset, [100.0, 101.0, 99.0, 100.0, 70.0, 71.0])
    sweeps = sorted(s["id"] for s in client.get("/api/v1/sweeps").json())
    newest, before = sweeps[-1], sweeps[-2]
    [alert] = client.get("/api/v1/alerts", params={"sweep_id": newest}).json()
    assert client.get("/api/v1/alerts", params={"sweep_id": sweeps[0]}).json() == []
    assert [a["id"] for a in client.get("/api/v1/alerts", params={"build": "b4"}).json()] == [alert["id"]]
    page = _text(client.get(f"/sweeps/{newest}").text)
    assert "1 open regression of cells this sweep ran" in page and "100 → 70 (-29.5 %) from build b4" in page
    compared = client.get("/api/v1/compare", params={"base_sweep": before, "head_sweep": newest}).json()
    assert [a["id"] for a in compared["alerts"]] == [alert["id"]]
    html = client.get("/compare", params={"base": before, "head": newest}).text
    assert "100 → 70 (-29.5 %) from build b4" in _text(html[html.index("Open regressions of the head"):])
    out = _status(db_url, newest)
    assert "open regressions of its cells: 1 tokens_per_s cpu ngram k=3 CPU_ATTN NONE: 100 -> 70.5 (-29.5 %) from build b4" in out
