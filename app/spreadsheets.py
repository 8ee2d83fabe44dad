"""Every CSV the service writes (the API's results, each page's table): one writer, so no cell of any of them is
a formula a spreadsheet would run (OWASP "CSV injection")."""

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from fastapi.responses import Response

# Spreadsheets run a cell that starts with one of these; the full-width forms are read as the same by
# East Asian Excel, and leading whitespace is trimmed by some on import.
FORMULA_START = ("=", "+", "-", "@", "＝", "＋", "－", "＠")
# A cell that starts with these is not shown as written (and Excel drops a leading tab or CR).
CONTROL_START = ("\t", "\r", "\n")


def spreadsheet_safe(value: Any) -> Any:
    """A CSV cell that no spreadsheet runs as a formula.

    Text (lists and mappings are written as JSON text) that starts with ``= + - @`` (or their full-width forms), after
    any leading whitespace, or with a tab, a carriage return or a line feed, gets a leading single quote,
    which spreadsheets show as text. Numbers stay numbers: -1.5 is data, not a formula. A float NaN is
    written as an empty cell, like None.
    """
    if isinstance(value, (list, dict)):
        value = json.dumps(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, str) and (value.startswith(CONTROL_START) or value.lstrip().startswith(FORMULA_START)):
        return "'" + value
    return value


def csv_response(columns: Sequence[str], rows: Iterable[Iterable[Any]], *, name: str) -> Response:
    """``rows`` (each a value per column; None is an empty cell) as the attachment ``draftbench-{name}.csv``,
    every cell, the header's too, through ``spreadsheet_safe``."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([spreadsheet_safe(c) for c in columns])
    writer.writerows([spreadsheet_safe(v) for v in row] for row in rows)
    return Response(
        buffer.getvalue(), media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="draftbench-{name}.csv"'},
    )
