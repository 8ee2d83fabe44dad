"""``/matrix``: backend x graph mode heatmaps per GPU x method for a sweep or any filter, coloured by a metric."""

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from app.alarms import service as alarms
from app.cells import parallel
from app.sessions import SessionDep
from dashboards import data, render
from dashboards.figures.heatmap import METRICS, heatmap, shared_scale
from dashboards.filters import Blank, FigureNumber, FiltersDep, Format

router = APIRouter()

LOSSLESS = ("The share of this cell's requests whose output equals its baseline's (the cell without speculation of the same "
            "sweep and repeat) at temperature 0, with Wilson's 95 % interval over those requests. Speculative decoding must "
            "not change the output, so below 1 is a finding; but a cell with synthetic acceptance "
            "(rejection_sample_method: synthetic) accepts drafts at set rates and differs by design. Empty: no baseline "
            "ran beside it.")

Metric = Annotated[Literal["acceptance", "acceptance_length", "tokens_per_s", "speedup"], Blank,
                   Query(description="What colours the heatmaps")]


@router.get("/matrix")
def matrix_page(request: Request, session: SessionDep, filters: FiltersDep, metric: Metric = "acceptance",
                format: Format = "html", figure: FigureNumber = None) -> Response:
    if (kept := render.kept_figure(request, format, figure)) is not None:
        return kept
    scope = filters.scope(default_builds=data.recent_builds(session=session))
    cells = data.cells(session=session, scope=scope)
    # Acceptance by prompt category pools a few hundred bytes of JSON per result: one sweep or one build (up to a few
    # thousand results), not the default's ten builds (21,600 at 100k results stored: a second more per view).
    by_category = format == "html" and (scope.sweep_id is not None or scope.build is not None)
    if by_category:
        data.with_requests(session=session, scope=scope, found=cells)
    alarmed = alarms.by_cell(alarms.judge(cells).alarms)
    frame = data.cells_frame(cells, alarmed)
    if format == "csv":
        return render.csv(frame, "matrix")
    panels = []
    if not frame.empty:
        scale = shared_scale(frame, metric)  # one colour one value on every panel of the page
        for (build, gpu, method, _), group in frame.groupby(["build", "gpu_kind", "method", "variant"], sort=False):
            panels.append((f"{gpu} · {method} · {build}", heatmap(group, metric, f"{gpu} · {method} · {build}", scale)))
    drawings = [drawing for _, drawing in panels]
    if format == "svg":
        return render.figure(drawings, figure)
    toggles = {m: filters.link("/matrix", metric=m) for m in METRICS}
    return render.page(request, "matrix.html", filters, drawings=drawings, cells=cells, alarmed=alarmed, panels=panels,
                       metric=metric, toggles=toggles, by_category=by_category, metrics=METRICS, scope=scope,
                       twins=[(t, parallel.sentence(t)) for t in parallel.twins(cells)], facts=data.run_facts(cells),
                       csv_link=filters.link("/matrix", metric=metric, format="csv"), lossless=data.lossless,
                       synthetic=data.synthetic, lossless_meaning=LOSSLESS)
