"""``/fallback``: what the eager fallback costs, per GPU x method, most expensive first."""

import pandas as pd
from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.cells import fallback
from app.sessions import SessionDep
from dashboards import data, marks, render
from dashboards.figures import Drawing
from dashboards.figures.bars import speed_bars
from dashboards.filters import FigureNumber, FiltersDep, Format

router = APIRouter()


@router.get("/fallback")
def fallback_page(request: Request, session: SessionDep, filters: FiltersDep, format: Format = "html",
                  figure: FigureNumber = None) -> Response:
    if (kept := render.kept_figure(request, format, figure)) is not None:
        return kept
    scope = filters.scope(default_builds=data.recent_builds(session=session))
    # The filter picks the rows; their references are read whatever backend, graph mode or sweep it names.
    costs = fallback.costs(data.cells(session=session, scope=fallback.references(scope, session=session)), shown=scope)
    frame = _frame(costs)
    if format == "csv":
        return render.csv(frame, "fallback")
    figures = _figures(frame)
    drawings = [drawing for _, drawing in figures]
    if format == "svg":
        return render.figure(drawings, figure)
    return render.page(
        request, "fallback.html", filters, drawings=drawings, costs=costs, top=fallback.most_expensive(costs),
        uncosted=fallback.uncosted(costs), scope=scope,
        figures=figures, facts=data.run_facts(list({id(c): c for cost in costs for c in cost.read}.values())),
        fmt=fallback.format_ratio, csv_link=filters.link("/fallback", format="csv"),
    )


def _figures(frame: pd.DataFrame) -> list[tuple[str, Drawing | None]]:
    """(title, bars) per GPU x config x build: one figure per config (``variant``), so two configs of one label never
    share a row."""
    figures = []
    if not frame.empty:
        groups = frame.groupby(["build", "gpu_kind", "method", "variant"], sort=False)
        for (build, gpu, method, _), group in sorted(groups, key=lambda g: (g[0][0], g[0][1], marks.natural(g[0][2]))):
            title = f"{gpu} · {method} · {build}"
            figures.append((title, speed_bars(group, f"{title}: tokens/s by backend / graph mode")))
    return figures


def _frame(costs: list[fallback.Cost]) -> pd.DataFrame:
    """The shown cells (``cells_frame``) with each cost, its 95 % interval and the reference it divides by; a cell that is
    its own reference costs exactly 1, without the interval of a ratio of two independent cells."""
    frame = data.cells_frame([c.cell for c in costs])
    for name, ratio, ref in (("requested", "vs_requested", "requested"), ("best", "vs_best", "best")):
        refs = [getattr(c, ref) for c in costs]
        values = [(1.0, 1.0, 1.0) if r is c.cell else (v.value, v.low, v.high) if v else (None, None, None)
                  for c, r, v in zip(costs, refs, (getattr(c, ratio) for c in costs), strict=True)]
        frame[f"cost_vs_{name}"] = [v[0] for v in values]
        frame[f"cost_vs_{name}_low"] = [v[1] for v in values]
        frame[f"cost_vs_{name}_high"] = [v[2] for v in values]
        frame[f"{name}_backend"] = [r.backend if r else None for r in refs]
        frame[f"{name}_graph_mode"] = [r.graph_mode if r else None for r in refs]
        frame[f"{name}_repeats"] = [r.speed.repeats if r and r.speed else None for r in refs]
    return frame
