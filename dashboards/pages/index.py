"""``/``: the latest sweeps with their progress, the open alarms of the newest build, the open regressions across
builds (alerts), and the live workers."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.alarms import service as alarms
from app.alerts import service as alert_service
from app.cells.scope import CellScope
from app.models import utcnow
from app.sessions import SessionDep, SettingsDep
from app.sweeps import service as sweeps
from app.workers import service as workers
from dashboards import data, render
from dashboards.filters import Filters

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
def index(request: Request, session: SessionDep, settings: SettingsDep) -> HTMLResponse:
    rows = sweeps.summaries(session=session, limit=50, offset=0)
    now = utcnow()
    fleet = [workers.to_out(w, lease_seconds=settings.lease_seconds, now=now) for w in workers.list_all(session=session)]
    builds = data.recent_builds(session=session)
    found = alarms.find(data.cells(session=session, scope=CellScope(builds=builds))) if builds else []
    regressions, as_of = alert_service.latest_open(session=session)
    return render.page(request, "index.html", None, sweeps=rows, live=[w for w in fleet if w.alive],
                       dead=len(fleet) - sum(w.alive for w in fleet), alarms=found, builds=builds,
                       regressions=[(a, _history_link(a)) for a in regressions], regressions_as_of=as_of,
                       refresh_s=settings.stall_check_seconds)


def _history_link(alert: alert_service.Alert) -> str:
    """The alerted cell's history across builds (``/history``)."""
    cell = alert.cell
    return Filters(gpu_kind=cell.gpu_kind, method=cell.method, backend=cell.backend, graph_mode=cell.graph_mode).link("/history")
