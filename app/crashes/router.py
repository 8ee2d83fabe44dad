"""``/api/v1/crashes``: crash groups by signature, with the cells and builds they hit."""

from typing import Annotated

from fastapi import APIRouter, Query

from app.crashes import service
from app.deps import SessionDep
from app.enums import CrashKind
from app.responses import answers
from app.schemas.result import CrashCell, CrashGroupDetail, CrashGroupOut

router = APIRouter(prefix="/api/v1/crashes", tags=["crashes"])


@router.get("", response_model=list[CrashGroupOut], responses=answers(422))
def list_crashes(
    session: SessionDep,
    kind: CrashKind | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> list[CrashGroupOut]:
    """Crash groups, most recently seen first; ``kind`` keeps one crash kind."""
    groups = service.list_groups(session=session, limit=limit, offset=offset, kind=kind)
    return [CrashGroupOut.model_validate(g, from_attributes=True) for g in groups]


@router.get("/{signature}", response_model=CrashGroupDetail, responses=answers(404, 422))
def get_crash(signature: str, session: SessionDep) -> CrashGroupDetail:
    group = service.get_group(session=session, signature=signature)
    jobs, builds = service.affected(session=session, group=group)
    cells = [
        CrashCell(job_id=j.id, sweep_id=j.sweep_id, gpu_kind=j.gpu_kind, backend=j.backend, graph_mode=j.graph_mode,
                  method=j.method, build=j.build, log=f"/api/v1/jobs/{j.id}/log")
        for j in jobs
    ]
    return CrashGroupDetail(
        **CrashGroupOut.model_validate(group, from_attributes=True).model_dump(),
        job_ids=[j.id for j in jobs],
        builds=builds,
        cells=cells,
    )
