"""``/history``: a cell (or a filter's cells) across builds: acceptance and tokens/s with intervals, change points marked;
below, the newest bisections of a series of builds (``draftbench bisect``), each step with its evidence."""

import pandas as pd
from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.analysis.changepoints import Point, steps
from app.analysis.verdicts import DEFAULT_THRESHOLD as MIN_SPEED_CHANGE
from app.bisections import service as bisections
from app.cells.scope import CellScope
from app.sessions import SessionDep
from dashboards import data, marks, render
from dashboards.figures.history import history
from dashboards.filters import FigureNumber, FiltersDep, Format
from dashboards.frames import known_float

router = APIRouter()

MIN_ACCEPTANCE_CHANGE = 0.02
SHOWN = 8  # lines on the figure; the table lists every series
BISECTIONS = 5  # the newest shown; /api/v1/bisections lists more


@router.get("/history")
def history_page(request: Request, session: SessionDep, filters: FiltersDep, format: Format = "html",
                 figure: FigureNumber = None) -> Response:
    if (kept := render.kept_figure(request, format, figure)) is not None:
        return kept
    none_stored = False  # a page unasked on an empty database has no cell to pick, not one that never ran
    if not any((filters.method, filters.backend, filters.graph_mode, filters.sweep_id, filters.build)):
        latest = data.latest_cell(session=session)
        none_stored = latest is None and not data.recent_builds(session=session)
        filters = filters.with_(**(latest or {}))
    scope = CellScope(sweep_id=filters.sweep_id, build=filters.build, gpu_kind=filters.gpu_kind, method=filters.method,
                      backend=filters.backend, graph_mode=filters.graph_mode)
    cells = data.cells(session=session, scope=scope, speedups=False)
    frame = data.cells_frame(cells)
    series = []
    # The sweep a point links to: the one whose result it pooled last (a queued job's sweep holds no run of it).
    frame["sweep"] = [c.measured_in[max(c.measured_in)] if c.measured_in else c.sweep_ids[-1] for c in cells]
    frame["measured_sweeps"] = [" ".join(map(str, marks.ran_in(c)[0])) for c in cells]
    if frame.empty:
        for name in ("committed_at", "when", "placed_by", "acceptance_change", "speed_change"):
            frame[name] = []
    else:
        frame["committed_at"] = frame["build"].map(data.commit_dates(session=session, builds=set(frame["build"])))
        # A series is one measured identity across builds: two configs of one sweep that share a label are two series.
        for (gpu, method, backend, mode, _), group in frame.groupby(["gpu_kind", "method", "backend", "graph_mode", "variant"],
                                                                    sort=True):
            group = _placed(group.copy())
            group["acceptance_change"] = _flags(group, "acceptance", MIN_ACCEPTANCE_CHANGE, relative=False)
            group["speed_change"] = _flags(group, "tokens_per_s", MIN_SPEED_CHANGE, relative=True)
            series.append((f"{gpu} {method} {backend} {mode}", group))
    if format == "csv":
        return render.csv(frame if not series else _concat(series), "history")
    drawing = history(series[:SHOWN])
    if format == "svg":
        return render.figure([drawing], figure)
    recent = [(b, bisections.standing(b), bisections.bad_sweep(b))
              for b in bisections.recent(session=session, limit=BISECTIONS)]
    return render.page(request, "history.html", filters, drawings=[drawing], series=series, figure=drawing, shown=SHOWN,
                       facts=data.run_facts(cells), csv_link=filters.link("/history", format="csv"), bisections=recent,
                       none_stored=none_stored)


def _placed(group: pd.DataFrame) -> pd.DataFrame:
    """A series in the order of its builds' commits when every build recorded its commit date, else in the order
    they first ran (``PooledCell.first_ran_at``: a build run again later, as a CI pair's base or an A/A, is no newer
    for it; by its newest run the H100's base build once came after the build that slowed it, and was ringed as the
    change); ``when`` holds the date it is placed at and ``placed_by`` which one it is."""
    by_commit = bool(group["committed_at"].notna().all())
    group["when"] = group["committed_at"] if by_commit else group["first_ran_at"]
    group["placed_by"] = "commit" if by_commit else "run"
    return group.sort_values("when", na_position="first")


def _flags(group: pd.DataFrame, column: str, minimum: float, *, relative: bool) -> list[bool]:
    """Change points of one column of a series in run order, over the runs that measured it (a build whose
    cells all died is skipped, so the builds either side of it are compared); ``relative`` as the alerts
    fit the same metric (``app.analysis.changepoints``)."""
    measured = [(i, Point(float(v), known_float(low), known_float(high)))
                for i, (v, low, high) in enumerate(zip(group[column], group[f"{column}_low"], group[f"{column}_high"], strict=True))
                if known_float(v) is not None and (v > 0 or not relative)]
    changed = {measured[k][0] for k in steps([p for _, p in measured], minimum, relative=relative)}
    return [i in changed for i in range(len(group))]


def _concat(series: list[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    return pd.concat([group for _, group in series], ignore_index=True)
