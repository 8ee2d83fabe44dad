"""``/alarms``: graphed cells whose acceptance or lossless share moved against their eager sibling."""

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


@router.get("/alarms")
def alarms_page(request: Request, session: SessionDep, filters: FiltersDep, min_effect: MinEffect = None,
                format: Format = "html") -> Response:
    min_effect = MIN_EFFECT if min_effect is None else min_effect
    scope = filters.scope(default_builds=data.recent_builds(session=session))
    cells = data.cells(session=session, scope=scope)
    found = alarms.find(cells, min_effect=min_effect)
    if format == "csv":
        frame = data.cells_frame([a.cell for a in found], alarms.by_cell(found))
        if not frame.empty:
            frame.insert(0, "alarm_kind", [a.kind.value for a in found])
            frame["eager_backend"] = [a.sibling.backend for a in found]
            frame["difference"] = [a.difference.value for a in found]
            frame["difference_low"] = [a.difference.low for a in found]
            frame["difference_high"] = [a.difference.high for a in found]
        return render.csv(frame, "alarms")
    judged = sum(1 for c in cells if c.method and c.graph_mode != "NONE" and c.draft_tokens)
    return render.page(request, "alarms.html", filters, alarms=found, judged=judged, min_effect=min_effect,
                       scope=scope, facts=data.run_facts(cells), cells=cells,
                       csv_link=filters.link("/alarms", min_effect=min_effect, format="csv"))
