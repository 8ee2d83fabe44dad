"""The one CSV writer: nothing a spreadsheet would run as a formula, whatever the text's first characters."""

import csv
import io

import pytest

from app.spreadsheets import csv_response, spreadsheet_safe


@pytest.mark.parametrize(
    ("value", "written"),
    [("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("+1+1", "'+1+1"), ("-2+3", "'-2+3"),
     ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"), ("\rx", "'\rx"), ("plain", "plain"), (-1.5, -1.5), (3, 3), (None, None),
     ([1, 2], "[1, 2]"), (float("nan"), None), ("", ""), ("a=b", "a=b"), ("'=already", "'=already")],
)
def test_text_that_starts_a_formula_gets_a_quote_and_numbers_stay_numbers(value, written) -> None:
    assert spreadsheet_safe(value) == written


@pytest.mark.parametrize("value", [" =1+1", "  @SUM(A1)", "\n=1+1", "\u3000=1+1", "\xa0-1+1", "＝1+1", "＋1", "－1", "＠A1",
                                   " \t+cmd", "\n", "\r\n=x"])
def test_a_formula_behind_whitespace_or_in_full_width_forms_gets_a_quote(value: str) -> None:
    assert spreadsheet_safe(value) == "'" + value


def test_every_cell_and_the_header_go_through_the_quote() -> None:
    response = csv_response(["=header", "n"], [["=HYPERLINK(\"http://x\",\"y\")", -2.5], [None, float("nan")]], name="t")
    assert response.headers["content-disposition"] == 'attachment; filename="draftbench-t.csv"'
    rows = list(csv.reader(io.StringIO(response.body.decode())))
    assert rows == [["'=header", "n"], ["'=HYPERLINK(\"http://x\",\"y\")", "-2.5"], ["", ""]]
