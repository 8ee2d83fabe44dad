"""``/crashes``: crash groups with count, first and last seen, builds and cells hit, message, frames and a log excerpt."""

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse

from app.crashes import service as crashes
from app.models import CrashSignature
from app.sessions import SessionDep
from app.sweeps import service as sweeps
from dashboards import data, render
from dashboards.filters import FiltersDep

router = APIRouter()

SHOWN = 50
JOBS_SHOWN = 20  # a group's newest crashes listed on /crashes; its own page lists them all


@router.get("/crashes", response_class=HTMLResponse)
def crashes_page(request: Request, session: SessionDep, filters: FiltersDep) -> HTMLResponse:
    scoped = any((filters.sweep_id, filters.build, filters.gpu_kind, filters.method, filters.backend, filters.graph_mode))
    cells = data.cells(session=session, scope=filters.scope(default_builds=None), speedups=False) if scoped else []
    job_ids = [j for c in cells for j in c.job_ids] if scoped else None
    groups = crashes.groups_in(session=session, job_ids=job_ids, limit=SHOWN)
    # Whether anything ran that could have crashed: without a crash, "none crashed" says nothing where nothing ran.
    if scoped:
        stored = bool(cells)
        ran = sum(c.ran + c.died for c in cells)
    else:
        stored = ran = bool(groups or sweeps.list_recent(session=session, limit=1, offset=0))
    return render.page(request, "crashes.html", filters, groups=_described(session, groups), scoped=scoped,
                       facts=data.run_facts(cells), stored=stored, ran=ran)


@router.get("/crashes/{signature}", response_class=HTMLResponse)
def crash_page(request: Request, session: SessionDep, signature: str = Path(max_length=64)) -> HTMLResponse:
    group = crashes.get_group(session=session, signature=signature)
    return render.page(request, "crashes.html", None, groups=_described(session, [group], every_cell=True), scoped=True,
                       single=True)


def _described(session: SessionDep, groups: list[CrashSignature], every_cell: bool = False) -> list[dict]:
    ids = [g.id for g in groups]
    jobs = crashes.members(session=session, group_ids=ids)
    # The excerpt of each group's newest crash (``members`` lists them newest first): the one its last seen is from.
    newest = {g: found[0].id for g, found in jobs.items() if found}
    shown = crashes.excerpts(session=session, job_ids=list(newest.values()))
    described = []
    for group in groups:
        members = jobs[group.id]
        log_job = newest.get(group.id)
        cells = sorted({(j.gpu_kind, j.backend, j.graph_mode, j.method or "baseline", j.build) for j in members})
        described.append({
            "group": group, "jobs": members if every_cell else members[:JOBS_SHOWN], "cells": cells,
            "older": 0 if every_cell else max(len(members) - JOBS_SHOWN, 0),
            "builds": sorted({j.build for j in members}), "excerpt": shown.get(log_job), "log_job": log_job,
        })
    return described
