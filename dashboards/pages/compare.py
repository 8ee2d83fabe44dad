"""``/compare``: two sweeps or two builds, every common cell with base, head, change and verdict, worst first; and each
side's graph-capture alarms and the head's open regressions."""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.alarms import service as alarms
from app.alerts import service as alert_service
from app.cells.scope import CellScope
from app.sessions import SessionDep
from app.sweeps import service as sweep_service
from dashboards import data, render
from dashboards.filters import BuildLabel, FiltersDep, Format, SweepId, existing

router = APIRouter()

# Sweeps the form offers to pick from, newest first (and their builds); an older one is still named by its id.
PICKABLE = 200


@router.get("/compare")
def compare_page(request: Request, session: SessionDep, filters: FiltersDep, base: SweepId = None, head: SweepId = None,
                 base_build: BuildLabel = None, head_build: BuildLabel = None, format: Format = "html") -> Response:
    existing(session, base, head)
    if not (base or base_build) and not (head or head_build):
        pair = data.default_pair(session=session)
        if pair:
            base, head = pair
    scopes = [
        CellScope(sweep_id=sweep_id, build=build, gpu_kind=filters.gpu_kind, method=filters.method,
                  backend=filters.backend, graph_mode=filters.graph_mode)
        if sweep_id is not None or build is not None else None
        for sweep_id, build in ((base, base_build), (head, head_build))
    ]
    *sides, changes = data.compare(session=session, base=scopes[0], head=scopes[1])
    if format == "csv":
        # Every column whether or not the sides share a cell: an empty comparison's CSV keeps its header row.
        frame = data.cells_frame([c.head for c in changes])
        frame.insert(0, "verdict", [c.verdict.value for c in changes])
        base_frame = data.cells_frame([c.base for c in changes])
        for column in ("build", "acceptance", "tokens_per_s", "tokens_per_joule", "downgraded", "died"):
            frame[f"base_{column}"] = base_frame[column]
        frame["speed_ratio"] = [c.speed.value if c.speed else None for c in changes]
        frame["speed_ratio_low"] = [c.speed.low if c.speed else None for c in changes]
        frame["speed_ratio_high"] = [c.speed.high if c.speed else None for c in changes]
        for end in ("value", "low", "high"):
            frame[f"tokens_per_joule_ratio{'' if end == 'value' else '_' + end}"] = [
                getattr(c.per_joule, end) if c.per_joule else None for c in changes]
        calls = [c.numbers.throughput if c.numbers else None for c in changes]
        frame["speed_rule"] = [call.rule.value if call else None for call in calls]
        frame["speed_pairs"] = [call.pairs if call else None for call in calls]
        frame["speed_detectable"] = [call.detectable if call else None for call in calls]
        frame["acceptance_delta"] = [c.acceptance.difference if c.acceptance else None for c in changes]
        frame["reasons"] = ["; ".join(c.reasons) for c in changes]
        return render.csv(frame, "compare")
    args = {"base": base, "head": head, "base_build": base_build, "head_build": head_build}
    counts = {}
    for change in changes:
        counts[change.verdict.value] = counts.get(change.verdict.value, 0) + 1
    judged = [alarms.read(session=session, scope=scope, checks=False) if scope is not None else None for scope in scopes]
    regressions = []
    if scopes[1] is not None:
        regressions = alert_service.concerning(alert_service.latest_open(session=session)[0], sweep_id=head, build=head_build)
    stored = sweep_service.list_recent(session=session, limit=PICKABLE, offset=0)
    picks = {"sweeps": [(s.id, f"{s.id} · {s.name} · {s.build}") for s in stored],
             "builds": sorted({s.build for s in stored})}
    apart = None if changes else data.apart(*sides)
    return render.page(request, "compare.html", filters, changes=changes, sides=sides, args=args, counts=counts, picks=picks,
                       apart=apart,
                       judged=judged, regressions=data.with_history_links(regressions),
                       facts=data.run_facts(sides[0] + sides[1]),
                       csv_link=filters.link("/compare", **args, format="csv"))
