"""``/api/v1/alarms``: the graph-capture correctness alarm (``app.alarms.service``) as JSON."""

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from app.alarms import service as alarms
from app.analysis.alarms import MIN_EFFECT
from app.api.responses import answers
from app.cells import service as cells
from app.cells.scope import CellScope
from app.enums import AlarmKind, AttentionBackend, GpuKind, SpecMethod
from app.sessions import SessionDep

router = APIRouter(prefix="/api/v1", tags=["results"])


class AlarmOut(BaseModel):
    """A graphed cell whose acceptance (or lossless share) moved against its eager sibling beyond the interval of
    the difference and the minimum effect. Proportions are over the repeats' summed counts."""

    kind: AlarmKind
    build: str
    gpu_kind: str
    method: str | None
    backend: str
    graph_mode: str
    resolved_graph_modes: list[str]
    value: float
    eager_value: float
    eager_backend: str
    difference: float
    difference_low: float
    difference_high: float
    draft_tokens: int
    eager_draft_tokens: int
    job_ids: list[int]
    eager_job_ids: list[int]
    sentence: str


@router.get("/alarms", response_model=list[AlarmOut], responses=answers(422))
def list_alarms(
    session: SessionDep,
    sweep_id: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    build: Annotated[str | None, Query(max_length=128, description="Default: the builds of the 10 newest sweeps")] = None,
    gpu_kind: GpuKind | None = None,
    method: SpecMethod | None = None,
    backend: AttentionBackend | None = None,
    min_effect: Annotated[float, Query(ge=0, le=1, description="Smallest difference flagged")] = MIN_EFFECT,
) -> list[AlarmOut]:
    """Cells whose acceptance differs from their eager (graph mode NONE) sibling's beyond the 95 % interval of the
    difference (Newcombe) and ``min_effect``, or whose lossless share against the baseline drops so; worst first.

    Without ``sweep_id`` or ``build``, the builds of the 10 newest sweeps are read.
    """
    builds = cells.recent_builds(session=session) if sweep_id is None and build is None else None
    scope = CellScope(sweep_id=sweep_id, build=build, builds=builds, gpu_kind=gpu_kind and gpu_kind.value,
                            method=method and method.value, backend=backend and backend.value)
    found = alarms.find(cells.load(session=session, scope=scope), min_effect=min_effect)
    return [_out(a) for a in found]


def _out(alarm: alarms.Alarm) -> AlarmOut:
    cell, sibling = alarm.cell, alarm.sibling
    return AlarmOut(
        kind=alarm.kind, build=cell.build, gpu_kind=cell.gpu_kind, method=cell.method, backend=cell.backend,
        graph_mode=cell.graph_mode, resolved_graph_modes=sorted(cell.resolved_graph_modes),
        value=alarms.proportion(alarm.kind, cell), eager_value=alarms.proportion(alarm.kind, sibling),
        eager_backend=sibling.backend, difference=alarm.difference.value, difference_low=alarm.difference.low,
        difference_high=alarm.difference.high, draft_tokens=cell.draft_tokens, eager_draft_tokens=sibling.draft_tokens,
        job_ids=cell.job_ids, eager_job_ids=sibling.job_ids, sentence=alarm.sentence,
    )
