"""HTML pages: the sweep list and one page per sweep."""

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from app.deps import SessionDep
from app.sweeps import service as sweeps
from dashboards import data, figures

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).parent / "templates")


@router.get("/", response_class=HTMLResponse)
def index(request: Request, session: SessionDep) -> HTMLResponse:
    rows = sweeps.summaries(session=session, limit=200, offset=0)
    return templates.TemplateResponse(request, "index.html", {"sweeps": rows})


@router.get("/sweeps/{sweep_id}", response_class=HTMLResponse)
def sweep_page(sweep_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    summary = sweeps.summary(session=session, sweep=sweeps.get(session=session, sweep_id=sweep_id))
    table = data.matrix_table(data.sweep_cells(session=session, sweep_id=sweep_id))
    return templates.TemplateResponse(
        request,
        "sweep.html",
        {"sweep": summary, "rows": table.to_dict("records"), "chart": figures.throughput_by_cell(table)},
    )
