"""The CSV export: one line per result, and nothing a spreadsheet would run as a formula."""

import csv
import io

import pytest

from app.results.router import spreadsheet_safe
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body


@pytest.mark.parametrize(
    ("value", "written"),
    [("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("+1+1", "'+1+1"), ("-2+3", "'-2+3"),
     ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"), ("\rx", "'\rx"), ("plain", "plain"), (-1.5, -1.5), (3, 3), (None, None),
     ([1, 2], "[1, 2]")],
)
def test_text_that_starts_a_formula_gets_a_quote_and_numbers_stay_numbers(value, written) -> None:  # noqa: ANN001
    assert spreadsheet_safe(value) == written


def test_a_sweep_named_like_a_formula_is_exported_as_text(client, dataset) -> None:  # noqa: ANN001
    worker = register_worker(client)
    sweep = submit(client, sweep_body(dataset, name="=cmd|' /C calc'!A0", repeats=1)).json()
    job = claim(client, worker)
    result = cell_result() | {"output_fingerprint": "@evil"}
    assert complete(client, job["job_id"], worker, {"result": result, "exit_code": 0}).status_code == 200
    [row] = list(csv.DictReader(io.StringIO(client.get("/api/v1/results.csv", params={"sweep_id": sweep["id"]}).text)))
    assert row["sweep_name"] == "'=cmd|' /C calc'!A0" and row["output_fingerprint"] == "'@evil"
    assert float(row["tokens_per_s"]) == 100.0
