"""``/api/v1/alerts``: open regressions in the cells' histories; acknowledging one with a reason."""

from typing import Annotated

from fastapi import APIRouter, Path, Query

from app.alerts import service
from app.api.deps import Submitter
from app.api.responses import answers
from app.enums import AlertState
from app.schemas.alert import AckIn, AlertOut
from app.schemas.ids import Id
from app.sessions import SessionDep

router = APIRouter(prefix="/api/v1/alerts", tags=["alerts"])

AlertId = Annotated[str, Path(min_length=16, max_length=16, pattern="^[0-9a-f]{16}$")]


@router.get("", response_model=list[AlertOut], responses=answers(422))
def list_alerts(
    session: SessionDep,
    state: Annotated[AlertState, Query(description="open: not acknowledged")] = AlertState.OPEN,
    sweep_id: Annotated[Id | None, Query(description="Only those whose newest cell ran in this sweep")] = None,
    build: Annotated[str | None, Query(max_length=128, description="Only drops that began at this build or are open at it")] = None,
) -> list[AlertOut]:
    """Cells whose tokens/s or acceptance dropped by over 5 % at some build and stayed down to the newest
    (``changepoints.open_regression`` on the cell's history across builds of its GPU kind), largest drop first."""
    found = service.concerning(service.current(session=session), sweep_id=sweep_id, build=build)
    return [out(a) for a in found
            if state is AlertState.ALL or (a.acknowledged is not None) == (state is AlertState.ACKNOWLEDGED)]


@router.post("/{alert_id}/ack", response_model=AlertOut, responses=answers(401, 403, 404, 409, 413, 422, 429))
def acknowledge(by: Submitter, alert_id: AlertId, body: AckIn, session: SessionDep) -> AlertOut:
    """Acknowledge an open alert with a reason: it leaves the open list (and ``draftbench_alerts_open``)."""
    who = f"{by.name} ({by.key})"[:200]
    return out(service.acknowledge(session=session, alert_id=alert_id, reason=body.reason, by=who))


def out(alert: service.Alert) -> AlertOut:
    """An alert as the API shows it (here and in ``/api/v1/compare``)."""
    cell, ack = alert.cell, alert.acknowledged
    return AlertOut(
        id=alert.id, metric=alert.metric, gpu_kind=cell.gpu_kind, method=cell.method, label=cell.label,  # type: ignore[arg-type]
        backend=cell.backend, graph_mode=cell.graph_mode, first_bad_build=alert.first_bad_build,
        last_good_build=alert.last_good_build, latest_build=cell.build, before=alert.before, after=alert.after,
        change=alert.change, builds=alert.builds, acknowledged=ack is not None, ack_reason=ack.reason if ack else None,
        acked_by=ack.created_by if ack else None, acked_at=ack.created_at if ack else None,
    )

