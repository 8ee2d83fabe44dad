"""``/``: the latest sweeps with their progress, the graph-capture alarms and calibration misses of every stored build,
the open regressions across builds (alerts), and the live workers."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.alarms import service as alarms
from app.alerts import service as alert_service
from app.cells.scope import CellScope
from app.models import utcnow
from app.results import calibration
from app.sessions import SessionDep, SettingsDep
from app.sweeps import service as sweeps
from app.workers import service as workers
from dashboards import data, render

router = APIRouter()

SWEEPS = 50  # the newest sweeps listed


@router.get("/", response_class=HTMLResponse)
def index(request: Request, session: SessionDep, settings: SettingsDep) -> HTMLResponse:
    rows = sweeps.summaries(session=session, limit=SWEEPS, offset=0)
    now = utcnow()
    fleet = [workers.to_out(w, lease_seconds=settings.lease_seconds, now=now) for w in workers.list_all(session=session)]
    regressions, as_of = alert_service.latest_open(session=session)
    gpu_kinds = data.sweep_gpu_kinds(session=session, sweep_ids=[s.id for s in rows])
    return render.page(request, "index.html", None, sweeps=rows, gpu_kinds=gpu_kinds, live=[w for w in fleet if w.alive],
                       dead=len(fleet) - sum(w.alive for w in fleet),
                       judgement=alarms.read(session=session, scope=CellScope(), checks=False),
                       misses=calibration.misses(session=session),
                       regressions=data.with_history_links(regressions), regressions_as_of=as_of,
                       refresh_s=settings.stall_check_seconds)

