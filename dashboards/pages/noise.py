"""``/noise``: how far tokens/s moves between engine starts of one cell on one build, per GPU kind, backend, graph
mode, draft or none, and mode, and the smallest change 3 and 8 starts a side would find (``app.noise.service``)."""

from itertools import groupby

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.noise import service as noise
from app.sessions import SessionDep
from dashboards import render

router = APIRouter()

SHOWN_SWEEPS = 12  # a class's builds named and sweeps linked in its row; the JSON lists every one


@router.get("/noise", response_class=HTMLResponse)
def noise_page(request: Request, session: SessionDep) -> HTMLResponse:
    found = noise.model(session=session)
    kinds = [(kind, list(classes)) for kind, classes in groupby(found, key=lambda c: c.noise_class.gpu_kind)]
    return render.page(request, "noise.html", None, kinds=kinds, starts=noise.MDE_STARTS, shown_sweeps=SHOWN_SWEEPS)
