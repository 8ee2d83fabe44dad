"""HTML pages: the sweep list and one page per sweep."""

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from app.deps import SessionDep, SettingsDep
from app.sweeps import service as sweeps
from dashboards import data, figures
from dashboards.cache import FinishedSweeps, is_over

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).parent / "templates")


@router.get("/", response_class=HTMLResponse)
def index(request: Request, session: SessionDep) -> HTMLResponse:
    rows = sweeps.summaries(session=session, limit=200, offset=0)
    return templates.TemplateResponse(request, "index.html", {"sweeps": rows})


@router.get("/sweeps/{sweep_id}", response_class=HTMLResponse)
def sweep_page(sweep_id: int, request: Request, session: SessionDep, settings: SettingsDep) -> HTMLResponse:
    summary = sweeps.summary(session=session, sweep=sweeps.get(session=session, sweep_id=sweep_id))
    # Read fresh on every view: a worker registering or dying changes them.
    warnings = sweeps.warnings(session=session, sweep_id=summary.id, lease_seconds=settings.lease_seconds)
    finished: FinishedSweeps = request.app.state.finished_sweeps
    matrix = finished.get(summary.id)
    if matrix is None:
        table = data.matrix_table(data.sweep_cells(session=session, sweep_id=summary.id))
        matrix = {"rows": table.to_dict("records"), "chart": figures.throughput_by_cell(table)}
        if is_over(summary.counts):
            finished.put(summary.id, matrix)
    return templates.TemplateResponse(request, "sweep.html", {"sweep": summary, "warnings": warnings, **matrix})
