"""What every page shares: its templates, the filter form's choices, and the CSV of a page's table."""

from pathlib import Path
from typing import Any

import pandas as pd
from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from fastapi.templating import Jinja2Templates

from app import spreadsheets
from app.enums import AttentionBackend, GpuKind, GraphMode, SpecMethod, allowed
from dashboards import frames
from dashboards.filters import Filters

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")

CHOICES = {
    "gpu_kind": allowed(GpuKind),
    "method": allowed(SpecMethod),
    "backend": allowed(AttentionBackend),
    "graph_mode": allowed(GraphMode),
}


def page(request: Request, template: str, filters: Filters | None, *, status_code: int = 200, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(
        request, template, {"filters": filters, "choices": CHOICES, "path": request.url.path, **context},
        status_code=status_code,
    )


def csv(frame: pd.DataFrame, name: str) -> Response:
    """The table behind a page's figure, as a spreadsheet opens it (``format=csv``), by the service's one CSV writer."""
    return spreadsheets.csv_response(list(frame.columns), frames.rows(frame), name=name)


def number(value: float | None, digits: int = 3) -> str:
    value = frames.known_float(value)
    return "" if value is None else f"{value:.{digits}f}"


def interval(value: float | None, low: float | None, high: float | None, digits: int = 3) -> str:
    """``0.910 [0.906, 0.914]``; the point alone when there is no interval."""
    value, low, high = frames.known_float(value), frames.known_float(low), frames.known_float(high)
    if value is None:
        return ""
    if low is None or high is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


templates.env.filters["num"] = number
templates.env.filters["known"] = frames.known
templates.env.globals["interval"] = interval
