"""``/serving``: serving cells against their clients: TTFT, TPOT and ITL, tokens/s, the failed requests and the
speedup, each speculative cell beside its baseline at the same clients; and for each method, its speedup against load
per k, the best k at each load, where each k stops paying and the speedup its counters predict (``mode=offline``:
offline cells against their batch size)."""

from dataclasses import replace
from typing import Annotated, Literal

import pandas as pd
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from app.cells.pooling import PooledCell
from app.enums import Mode
from app.sessions import SessionDep
from dashboards import data, frames, render
from dashboards.figures.serving import serving_figure
from dashboards.figures.speedup import speedup_figures
from dashboards.filters import FigureNumber, FiltersDep, Format

router = APIRouter()

GROUP = ["gpu_kind", "backend", "graph_mode", "build"]
ModeParam = Annotated[Mode, Query(description="serve: serving cells against clients; offline: offline cells against batch size")]
Table = Annotated[Literal["serving", "speedup"], Query(description="With format=csv: serving (the serving figures) or "
                                                                   "speedup (speedup against load per k, best k, break-even)")]


@router.get("/serving")
def serving_page(request: Request, session: SessionDep, filters: FiltersDep, format: Format = "html",
                 figure: FigureNumber = None, mode: ModeParam = Mode.SERVE, table: Table = "serving") -> Response:
    if (kept := render.kept_figure(request, format, figure)) is not None:
        return kept
    # Read with every method: a method filter keeps that method's cells and their baselines, beside which they are shown.
    scope = replace(filters.scope(default_builds=data.recent_builds(session=session)), method=None, mode=mode.value)
    cells = with_baselines(data.cells(session=session, scope=scope), filters.method)
    frame = data.serving_frame(cells)
    lines = data.speedup_lines(cells, mode.value)
    speedups = data.speedup_frame(lines)
    if format == "csv":
        return render.csv(speedups, "speedup") if table == "speedup" else render.csv(frame, "serving")
    groups = []
    if not frame.empty:
        for place, group in frame.groupby(GROUP, sort=False):
            title = " · ".join(place)
            groups.append((title, serving_figure(group, title), group))
    drawn = speedup_figures(speedups)
    along = [(line, drawn.get(number)) for number, line in enumerate(lines, 1)]
    drawings = [drawing for _, drawing in along] + [drawing for _, drawing, _ in groups]
    if format == "svg":
        return render.figure(drawings, figure)
    groups = [(title, drawing, frames.records(group)) for title, drawing, group in groups]
    return render.page(request, "serving.html", filters, drawings=drawings, groups=groups, failures=failures(frame), scope=scope,
                       cells=cells, facts=data.run_facts(cells), mode=mode.value, lines=[(line, drawing, data.speedup_sentences(line))
                                                                                         for line, drawing in along],
                       csv_link=filters.link("/serving", format="csv", mode=mode.value),
                       speedup_csv_link=filters.link("/serving", format="csv", table="speedup", mode=mode.value),
                       other_mode=filters.link("/serving", mode=(Mode.OFFLINE if mode is Mode.SERVE else Mode.SERVE).value))


def with_baselines(cells: list[PooledCell], method: str | None) -> list[PooledCell]:
    """The cells of ``method`` and their baselines (every cell without a method)."""
    if method is None:
        return cells
    paired = data.baselines(cells)
    kept = {c.key for c in cells if c.method == method}
    kept |= {paired[key].key for key in kept if key in paired}
    return [c for c in cells if c.key in kept]


def failures(frame: pd.DataFrame) -> str | None:
    """What a reader must know before the speedups: the cells whose requests failed, the worst named, and those whose
    failed share differs from their baseline's; None when no request failed."""
    if frame.empty or not (frame["failed"].fillna(0) > 0).any():
        return None
    failed = frame[frame["failed"].fillna(0) > 0]
    worst = failed.loc[failed["failed_share"].idxmax()]
    text = (f"Requests failed in {len(failed)} of {len(frame)} serving cells; the most in {worst['method']} "
            f"({worst['backend']} {worst['graph_mode']}, {worst['build']}): {int(worst['failed'])} of {int(worst['sent'])} sent, "
            f"{render.interval(worst['failed_share'] * 100, worst['failed_share_low'] * 100, worst['failed_share_high'] * 100, 1)} %.")
    if (failed["empty_as_failed"] > 0).any():
        text += (" Their runner (cell schema before 5) counted a stream whose tokens decoded to no text as failed and left"
                 " its tokens out of tokens/s, so these figures may count completed work as failed.")
    differ = int(frame["failed_differs"].sum())
    if differ:
        text += (f" {differ} speculative cell(s) failed a share of requests that differs from their baseline's: tokens/s counts"
                 " completed requests only, so their speedups compare unequal work.")
    return text
