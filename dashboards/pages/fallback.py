"""``/fallback``: what the eager fallback costs, per GPU x method, most expensive first."""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.cells import fallback
from app.sessions import SessionDep
from dashboards import data, render
from dashboards.figures.bars import speed_bars
from dashboards.filters import FiltersDep, Format

router = APIRouter()


@router.get("/fallback")
def fallback_page(request: Request, session: SessionDep, filters: FiltersDep, format: Format = "html") -> Response:
    scope = filters.scope(default_builds=data.recent_builds(session=session))
    cells = data.cells(session=session, scope=scope)
    costs = fallback.costs(cells)
    frame = data.cells_frame([c.cell for c in costs])
    if not frame.empty:
        frame["cost_vs_requested"] = [c.vs_requested.value if c.vs_requested else None for c in costs]
        frame["cost_vs_best"] = [c.vs_best.value if c.vs_best else None for c in costs]
    if format == "csv":
        return render.csv(frame, "fallback")
    figures = []
    if not frame.empty:
        for (build, gpu, method), group in frame.groupby(["build", "gpu_kind", "method"], sort=True):
            title = f"{gpu} · {method} · {build}"
            figures.append((title, speed_bars(group, f"{title}: tokens/s by backend / graph mode")))
    return render.page(
        request, "fallback.html", filters, costs=costs, top=fallback.most_expensive(costs), scope=scope,
        figures=figures, facts=data.run_facts(cells), fmt=fallback.format_ratio,
        csv_link=filters.link("/fallback", format="csv"),
    )
