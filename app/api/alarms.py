"""``/api/v1/alarms``: the graph-capture correctness alarm (``app.alarms.service``) as JSON."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from app.alarms import service as alarms
from app.analysis.alarms import MIN_EFFECT
from app.api.responses import answers
from app.cells.scope import CellScope
from app.enums import AttentionBackend, CheckOutcome, CheckReason, GpuKind, GraphMode, SpecMethod
from app.schemas.alarm import AlarmOut, CheckCounts, CheckOut
from app.schemas.ids import Id
from app.sessions import SessionDep

router = APIRouter(prefix="/api/v1", tags=["results"])


def _scope(
    sweep_id: Annotated[Id | None, Query(description="Alarms whose either side ran in this sweep")] = None,
    build: Annotated[str | None, Query(max_length=128)] = None,
    gpu_kind: GpuKind | None = None,
    method: SpecMethod | None = None,
    backend: AttentionBackend | None = None,
    graph_mode: GraphMode | None = None,
) -> CellScope:
    return CellScope(sweep_id=sweep_id, build=build, gpu_kind=gpu_kind and gpu_kind.value, method=method and method.value,
                     backend=backend and backend.value, graph_mode=graph_mode and graph_mode.value)


ScopeDep = Annotated[CellScope, Depends(_scope)]
MinEffect = Annotated[float, Query(ge=0, le=1, description="Smallest difference flagged; another than 0.02 judges anew")]


@router.get("/alarms", response_model=list[AlarmOut], responses=answers(422))
def list_alarms(session: SessionDep, scope: ScopeDep, min_effect: MinEffect = MIN_EFFECT) -> list[AlarmOut]:
    """Cells whose acceptance differs from their eager (graph mode NONE) sibling's beyond the 95 % interval of the
    difference (Newcombe) and ``min_effect``, or whose lossless share against the baseline drops so; worst first.

    Every stored build is read unless a filter narrows it; each cell is judged within its whole build and GPU
    kind (every sweep pooled), as stored whenever a result is (another ``min_effect`` judges the cells anew).
    """
    return [out(a) for a in alarms.read(session=session, scope=scope, min_effect=min_effect, checks=False).alarms]


@router.get("/alarms/counts", response_model=CheckCounts, responses=answers(422))
def count_checks(session: SessionDep, scope: ScopeDep, min_effect: MinEffect = MIN_EFFECT) -> CheckCounts:
    """How many graphed cells in scope the alarm flagged, did not flag (within their interval, or below the minimum
    effect), could not judge because their acceptance is degenerate, or could not pair with an eager sibling."""
    return check_counts(alarms.read(session=session, scope=scope, min_effect=min_effect, checks=False), scope)


@router.get("/alarms/checks", response_model=list[CheckOut], responses=answers(422))
def list_checks(session: SessionDep, scope: ScopeDep, min_effect: MinEffect = MIN_EFFECT,
                outcome: Annotated[CheckOutcome | None, Query(description="Only the cells that came to this")] = None,
                ) -> list[CheckOut]:
    """Every graphed cell with drafts in scope, what the alarm made of it and why: for a cell not flagged, whether the
    difference's interval included 0 (``within_interval``) or excluded it by less than the minimum effect
    (``below_min_effect``), with the difference, its interval and the minimum effect."""
    checks = alarms.read(session=session, scope=scope, min_effect=min_effect).checks
    return [_check_out(c) for c in checks if outcome is None or c.outcome == outcome]


def check_counts(judgement: alarms.Judgement, scope: CellScope) -> CheckCounts:
    spared = {reason: judgement.count_reason(reason) for reason in CheckReason if reason is not CheckReason.RAISED}
    return CheckCounts(scope=scope.describe(), alarmed=judgement.count("alarm"), within=judgement.count("within"),
                       within_by_reason=spared, cannot_show=judgement.count("cannot_show"),
                       unpaired=judgement.count("unpaired"), judged=judgement.judged)


def _check_out(check: alarms.Check) -> CheckOut:
    return CheckOut(build=check.build, gpu_kind=check.gpu_kind, method=check.method, label=check.label,
                    backend=check.backend, graph_mode=check.graph_mode, outcome=check.outcome, reason=check.reason,
                    kind=check.kind, min_effect=check.min_effect, sweep_ids=list(check.sweep_ids), sentence=check.sentence,
                    **alarms.difference_fields(check.difference))


def out(alarm: alarms.Alarm) -> AlarmOut:
    """An alarm as the API shows it (here and in ``/api/v1/compare``)."""
    cell, eager, d = alarm.cell, alarm.sibling, alarm.difference
    mine, theirs = cell.interval, eager.interval
    return AlarmOut(
        kind=alarm.kind, build=alarm.build, gpu_kind=alarm.gpu_kind, method=alarm.method, label=alarm.label,
        backend=cell.backend, graph_mode=cell.graph_mode, resolved_graph_modes=list(cell.resolved_graph_modes),
        value=mine[0], value_low=mine[1], value_high=mine[2], successes=cell.successes, trials=cell.trials,
        eager_value=theirs[0], eager_value_low=theirs[1], eager_value_high=theirs[2], eager_successes=eager.successes,
        eager_trials=eager.trials, eager_backend=eager.backend, difference=d.value, difference_low=d.low,
        difference_high=d.high, draft_tokens=cell.draft_tokens, eager_draft_tokens=eager.draft_tokens,
        job_ids=list(cell.job_ids), eager_job_ids=list(eager.job_ids), sweep_ids=list(alarm.sweep_ids),
        sentence=alarm.sentence,
    )
