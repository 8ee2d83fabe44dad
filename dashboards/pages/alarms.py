"""``/alarms``: graphed cells whose acceptance or lossless share moved against their eager sibling, over every stored
build unless a filter narrows it, with what became of the cells not flagged."""

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import Field
from sqlalchemy.orm import Session

from app.alarms import service as alarms
from app.analysis.alarms import MIN_EFFECT
from app.cells.scope import CellScope
from app.enums import CheckOutcome
from app.sessions import SessionDep
from app.sweeps import service as sweeps
from dashboards import data, render
from dashboards.filters import Blank, FiltersDep, Format

router = APIRouter()

MinEffect = Annotated[Annotated[float, Field(ge=0, le=1)] | None, Blank,
                     Query(description="Smallest difference flagged, as a proportion (default 0.02)")]


@router.get("/alarms")
def alarms_page(request: Request, session: SessionDep, filters: FiltersDep, min_effect: MinEffect = None,
                format: Format = "html") -> Response:
    min_effect = MIN_EFFECT if min_effect is None else min_effect
    scope = filters.scope(default_builds=None)
    if min_effect == MIN_EFFECT:
        judgement, below = alarms.read(session=session, scope=scope), None
    else:
        judgement, below = judged_anew(session, scope, min_effect)
    if format == "csv":
        return render.csv(data.alarms_frame(judgement.alarms), "alarms")
    return render.page(request, "alarms.html", filters, judgement=judgement, alarms=judgement.alarms, min_effect=min_effect,
                       below=below, scope=scope, facts=data.run_facts(judgement.checks),
                       csv_link=filters.link("/alarms", min_effect=min_effect, format="csv"))


def judged_anew(session: Session, scope: CellScope, min_effect: float) -> tuple[alarms.Judgement, int]:
    """The alarm over ``scope`` at ``min_effect`` (``app.alarms.service.read``: the cells of its builds read and judged
    now), and how many of the cells it leaves within their interval moved beyond it by less than ``min_effect``
    (flagged at no minimum effect): "within" would say of those what is not true. One reading of the cells, two
    judgements of them in memory."""
    builds = scope.builds
    if scope.sweep_id is not None:
        builds = (sweeps.get(session=session, sweep_id=scope.sweep_id).build,)
    cells = data.cells(session=session, scope=CellScope(build=scope.build, builds=builds, gpu_kind=scope.gpu_kind))
    found = alarms.judge(cells, min_effect=min_effect)
    judgement = alarms.Judgement([a for a in found.alarms if scope.holds(a)], [c for c in found.checks if scope.holds(c)])
    moved = {(a.build, a.gpu_kind, a.backend, a.graph_mode, a.variant) for a in alarms.judge(cells, min_effect=0.0).alarms}
    below = sum(c.outcome == CheckOutcome.WITHIN and (c.build, c.gpu_kind, c.backend, c.graph_mode, c.variant) in moved
                for c in judgement.checks)
    return judgement, below
