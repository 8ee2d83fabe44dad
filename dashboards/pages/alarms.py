"""``/alarms``: graphed cells whose acceptance or lossless share moved against their eager sibling, over every stored
build unless a filter narrows it, with what became of the cells not flagged and why each was not."""

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import Field

from app.alarms import service as alarms
from app.analysis.alarms import MIN_EFFECT
from app.sessions import SessionDep
from dashboards import data, render
from dashboards.filters import Blank, FiltersDep, Format

router = APIRouter()

MinEffect = Annotated[Annotated[float, Field(ge=0, le=1)] | None, Blank,
                     Query(description="Smallest difference flagged, as a proportion (default 0.02)")]
# Cells not flagged listed on the page, nearest to an alarm first: at 100,000 results a build has thousands, which
# ``/api/v1/alarms/checks`` gives whole.
SPARED_SHOWN = 100


@router.get("/alarms")
def alarms_page(request: Request, session: SessionDep, filters: FiltersDep, min_effect: MinEffect = None,
                format: Format = "html") -> Response:
    min_effect = MIN_EFFECT if min_effect is None else min_effect
    scope = filters.scope(default_builds=None)
    judgement = alarms.read(session=session, scope=scope, min_effect=min_effect)
    if format == "csv":
        return render.csv(data.alarms_frame(judgement.alarms), "alarms")
    spared = judgement.spared
    return render.page(request, "alarms.html", filters, judgement=judgement, alarms=judgement.alarms, min_effect=min_effect,
                       spared=spared[:SPARED_SHOWN], spared_count=len(spared), scope=scope,
                       facts=data.run_facts(judgement.checks),
                       csv_link=filters.link("/alarms", min_effect=min_effect, format="csv"),
                       checks_link=filters.link("/api/v1/alarms/checks", min_effect=min_effect, outcome="within"))
