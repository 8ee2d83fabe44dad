"""The CSV export: one line per result, and nothing a spreadsheet would run as a formula (``app.spreadsheets``)."""

import csv
import io

from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body


def test_a_sweep_named_like_a_formula_is_exported_as_text(client, dataset) -> None:
    worker = register_worker(client)
    sweep = submit(client, sweep_body(dataset, name="=cmd|' /C calc'!A0", repeats=1)).json()
    job = claim(client, worker)
    result = cell_result() | {"output_fingerprint": "@evil"}
    assert complete(client, job["job_id"], worker, {"result": result, "exit_code": 0}).status_code == 200
    [row] = list(csv.DictReader(io.StringIO(client.get("/api/v1/results.csv", params={"sweep_id": sweep["id"]}).text)))
    assert row["sweep_name"] == "'=cmd|' /C calc'!A0" and row["output_fingerprint"] == "'@evil"
    assert float(row["tokens_per_s"]) == 100.0
