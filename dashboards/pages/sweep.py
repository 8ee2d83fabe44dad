"""``/sweeps/{id}``: one sweep's cells (repeats pooled, with their intervals) and throughput chart, with the
graph-capture alarms, calibration misses, results whose spec-decode counters disagree and open regressions of what
it ran."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from app.alarms import service as alarms
from app.alerts import service as alert_service
from app.cells.scope import CellScope
from app.lru import LRU
from app.results import calibration
from app.results import counters as result_counters
from app.schemas.ids import Id
from app.sessions import SessionDep, SettingsDep
from app.sweeps import pairing
from app.sweeps import service as sweeps
from dashboards import data, render
from dashboards.cache import is_over
from dashboards.figures.requests import request_rates
from dashboards.figures.throughput import throughput_by_cell
from dashboards.filters import FigureNumber, Filters, Format

router = APIRouter()


@router.get("/sweeps/{sweep_id}", response_class=HTMLResponse)
def sweep_page(sweep_id: Id, request: Request, session: SessionDep, settings: SettingsDep, format: Format = "html",
               figure: FigureNumber = None) -> Response:
    if (kept := render.kept_figure(request, format, figure)) is not None:
        return kept
    summary = sweeps.summary(session=session, sweep=sweeps.get(session=session, sweep_id=sweep_id))
    finished: LRU[int, dict] = request.app.state.finished_sweeps
    matrix = finished.get(summary.id)
    if matrix is None:
        scope = CellScope(sweep_id=summary.id)
        cells = data.with_requests(session=session, scope=scope, found=data.cells(session=session, scope=scope))
        # Kept with a finished sweep's matrix too: a stored result's counters never change.
        matrix = {"cells": cells, "chart": throughput_by_cell(data.cells_frame(cells)),
                  "request_chart": request_rates(cells),
                  "counter_problems": result_counters.of_sweep(session=session, sweep_id=summary.id),
                  # Kept too: more starts of a paired sweep (POST .../more) pair them with the same partner.
                  "pair": _pair(session, summary.id)}
        if is_over(summary.counts):
            finished.put(summary.id, matrix)
    if format == "csv":
        return render.csv(data.cells_frame(matrix["cells"]), f"sweep-{summary.id}")
    if format == "svg":
        return render.figure([matrix["chart"], matrix["request_chart"]], figure)
    # Read fresh on every view: a worker registering or dying changes them.
    warnings = sweeps.warnings(session=session, sweep_id=summary.id, lease_seconds=settings.lease_seconds)
    views = Filters(sweep_id=summary.id)
    # Not kept with the finished matrix: another sweep of the build, or of a later one, changes them.
    regressions, as_of = alert_service.latest_open(session=session)
    # The per-request histogram is figure 2 where it is drawn: a page keeps no trailing figure it does not draw.
    drawings = [matrix["chart"], matrix["request_chart"]] if matrix["request_chart"] else [matrix["chart"]]
    return render.page(request, "sweep.html", None, drawings=drawings, sweep=summary, warnings=warnings, views=views,
                       facts=data.run_facts(matrix["cells"]),
                       judgement=alarms.read(session=session, scope=CellScope(sweep_id=summary.id)),
                       misses=calibration.misses(session=session, sweep_id=summary.id),
                       regressions=data.with_history_links(alert_service.concerning(regressions, sweep_id=summary.id)),
                       regressions_as_of=as_of, **matrix)


def _pair(session: Session, sweep_id: int) -> tuple[int, int] | None:
    """(base, head) of the pair of sweeps ``sweep_id`` belongs to (``draftbench ci``'s, run back to back), or None:
    the head is the sweep whose spec names the other in ``paired_with``; where neither does (an imported pair, whose
    specs lost the other database's ids), the base is the one submitted first. Its page's compare link opens that
    comparison, not a form that asks for a base the store already knows."""
    partner = pairing.partner(session=session, sweep_id=sweep_id)
    if partner is None:
        return None
    mine, theirs = sweeps.get(session=session, sweep_id=sweep_id), sweeps.get(session=session, sweep_id=partner)
    if mine.spec.get("paired_with") == theirs.id:
        return theirs.id, mine.id
    if theirs.spec.get("paired_with") == mine.id:
        return mine.id, theirs.id
    first, second = sorted((mine, theirs), key=lambda s: (s.created_at, s.id))
    return first.id, second.id
