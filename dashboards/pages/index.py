"""``/``: the latest sweeps with their progress, the open alarms of the newest build, and the live workers."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.deps import SessionDep, SettingsDep
from app.models import utcnow
from app.results import alarms
from app.results.cells import CellScope
from app.sweeps import service as sweeps
from app.workers import service as workers
from dashboards import data, render

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
def index(request: Request, session: SessionDep, settings: SettingsDep) -> HTMLResponse:
    rows = sweeps.summaries(session=session, limit=50, offset=0)
    now = utcnow()
    fleet = [workers.to_out(w, lease_seconds=settings.lease_seconds, now=now) for w in workers.list_all(session=session)]
    builds = data.recent_builds(session=session)
    found = alarms.find(data.cells(session=session, scope=CellScope(builds=builds))) if builds else []
    return render.page(request, "index.html", None, sweeps=rows, live=[w for w in fleet if w.alive],
                       dead=len(fleet) - sum(w.alive for w in fleet), alarms=found, builds=builds)
