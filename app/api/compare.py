"""``/api/v1/compare``: the compare table (``app.comparisons.service``) of two sweeps as JSON."""

from typing import Annotated

from fastapi import APIRouter, Query

from app.alarms import service as alarms
from app.alerts import service as alert_service
from app.analysis import verdicts
from app.api import alerts as alerts_api
from app.api.alarms import check_counts
from app.api.responses import answers
from app.cells import identity
from app.cells.pooling import PooledCell
from app.cells.scope import CellScope
from app.comparisons import service as comparisons
from app.schemas.compare import (
    Apart,
    CaptureAlarm,
    CellChange,
    CellSide,
    Comparison,
    FieldDifference,
    Interval,
    SpeedCall,
)
from app.schemas.ids import Id
from app.sessions import SessionDep
from app.sweeps import service as sweeps

router = APIRouter(prefix="/api/v1", tags=["results"])

SweepParam = Annotated[Id, Query(description="A sweep id")]
AlphaParam = Annotated[float, Query(gt=0, lt=1, description=(
    "The two-sided level of the tokens/s calls by the noise model or by pairs of starts (a CI run's later looks "
    "pass a share of it: app.analysis.sequential)"))]


@router.get("/compare", response_model=Comparison, responses=answers(404, 422))
def compare(session: SessionDep, base_sweep: SweepParam, head_sweep: SweepParam,
            alpha: AlphaParam = verdicts.SPEED_ALPHA) -> Comparison:
    """Every cell both sweeps ran (matched on what they measured, ``app.cells.identity``: not on rounds, window,
    warm-up or timeout), with its
    verdict (``newly_crashing``, ``worse``, ``now_downgraded``, ``now_eager_draft``, ``undecided``, ``pending``, ``unchanged``,
    ``better``, ``fixed``), worst first; the graph-capture alarms whose cell or eager sibling ran in the head sweep
    (``base_alarms``: in the base), each judged within its whole build and GPU kind, with what the alarm made of
    the head's graphed cells (``alarm_checks``); and the open regressions whose newest cell ran in the head sweep. The rule is the
    ``/compare`` page's: tokens/s per engine start, by the differences of paired starts, else by the noise model of
    its GPU kind, backend, graph mode and draft or none at level ``alpha`` (``tokens_per_s_call`` says which, and the
    change these starts could have found), else Mann-Whitney with 7 repeats a side or the cell's history on its GPU
    kind; acceptance by the two-proportion test with a 2-point minimum effect. When the two share no cell, ``apart``
    names the fields of the measured identity that differ.
    """
    base, head = (sweeps.get(session=session, sweep_id=i) for i in (base_sweep, head_sweep))
    base_cells, head_cells, changes = comparisons.between(
        session=session, base=CellScope(sweep_id=base.id), head=CellScope(sweep_id=head.id), alpha=alpha)
    counts: dict = {}
    for change in changes:
        counts[change.verdict] = counts.get(change.verdict, 0) + 1
    matched = len(changes)
    head_scope = CellScope(sweep_id=head.id)
    judged = alarms.read(session=session, scope=head_scope)
    regressions = alert_service.concerning(alert_service.open_alerts(session=session), sweep_id=head.id)
    return Comparison(
        base_sweep=base.id, head_sweep=head.id, base_build=base.build, head_build=head.build, counts=counts,
        changes=[_change(c) for c in changes], alarms=[_alarm(a) for a in judged.alarms],
        base_only=len(base_cells) - matched, head_only=len(head_cells) - matched,
        apart=None if changes else _apart(identity.apart(base_cells, head_cells)),
        alarm_checks=check_counts(judged, head_scope),
        base_alarms=[_alarm(a) for a in alarms.read(session=session, scope=CellScope(sweep_id=base.id)).alarms],
        alerts=[alerts_api.out(a) for a in regressions],
    )


def _apart(found: identity.Apart | None) -> Apart | None:
    if found is None:
        return None
    return Apart(sentence=found.sentence, fields=[
        FieldDifference(field=d.field, base=list(d.base), head=list(d.head), every_cell=d.every_cell) for d in found.differences])


def _interval(triple: tuple | None) -> Interval | None:
    return Interval(value=triple[0], low=triple[1], high=triple[2]) if triple else None


def _side(cell: PooledCell) -> CellSide:
    return CellSide(
        sweep_ids=cell.sweep_ids, build=cell.build, ran=cell.ran, died=cell.died, repeats=len(cell.repeats),
        tokens_per_s=_interval(cell.tokens_per_s), acceptance=_interval(cell.acceptance),
        resolved_graph_modes=sorted(cell.resolved_graph_modes), downgraded=cell.downgraded, draft_eager=cell.draft_eager,
        crash_kinds=dict(cell.crash_kinds), crash_signature=cell.crash_signature, crash_title=cell.crash_title,
        vllm_versions=sorted(cell.vllm_versions), gpu_names=sorted(cell.gpu_names), notes=cell.notes,
        job_ids=sorted(cell.job_ids), tokens_per_joule=_interval(cell.tokens_per_joule),
        energy_repeats=len(cell.energy_repeats), energy_reasons=sorted(cell.energy_reasons),
    )


def _change(change: comparisons.Change) -> CellChange:
    head, speed, moved, joule = change.head, change.speed, change.acceptance, change.per_joule
    return CellChange(
        verdict=change.verdict, gpu_kind=head.gpu_kind, method=head.method, label=head.label, backend=head.backend,
        graph_mode=head.graph_mode, reasons=list(change.reasons), base=_side(change.base), head=_side(head),
        speed_ratio=Interval(value=speed.value, low=speed.low, high=speed.high) if speed else None,
        acceptance_difference=Interval(value=moved.difference, low=moved.low, high=moved.high) if moved else None,
        tokens_per_s_change=change.numbers.throughput.change if change.numbers else None,
        tokens_per_s_call=_call(change) if change.numbers else None,
        acceptance_change=change.numbers.acceptance_change if change.numbers else None,
        tokens_per_joule_ratio=Interval(value=joule.value, low=joule.low, high=joule.high) if joule else None,
    )


def _call(change: comparisons.Change) -> SpeedCall:
    found = change.numbers.throughput
    return SpeedCall(
        change=found.change, rule=found.rule, ratio=found.ratio.ratio, low=found.ratio.low, high=found.ratio.high,
        confidence=found.ratio.confidence, detectable=found.detectable, base_starts=len(change.base.repeats),
        head_starts=len(change.head.repeats), pairs=found.pairs, sentence=verdicts.speed_sentence(found))


def _alarm(alarm: alarms.Alarm) -> CaptureAlarm:
    d = alarm.difference
    return CaptureAlarm(kind=alarm.kind, backend=alarm.backend, graph_mode=alarm.graph_mode,
                        label=alarm.label, difference=Interval(value=d.value, low=d.low, high=d.high),
                        sentence=alarm.sentence)
