"""``/api/v1/crashes``: crash groups by signature, with the cells and builds they hit; admins merge and split them."""

from typing import Annotated

from fastapi import APIRouter, Path, Query

from app.api.deps import AdminAuth
from app.api.responses import answers
from app.auth.service import Principal
from app.crashes import service
from app.crashes.schemas import CrashCell, CrashGroupDetail, CrashGroupOut, MergeIn, SplitIn
from app.enums import CrashKind
from app.sessions import SessionDep

router = APIRouter(prefix="/api/v1/crashes", tags=["crashes"])

Admin = Annotated[Principal, AdminAuth]
Signature = Annotated[str, Path(max_length=64)]


@router.get("", response_model=list[CrashGroupOut], responses=answers(422))
def list_crashes(
    session: SessionDep,
    kind: CrashKind | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> list[CrashGroupOut]:
    """Crash groups, newest first: by when they were last seen (the run time of their newest crash), the later
    stored first among equal times (``app.newest``); ``kind`` keeps one crash kind."""
    groups = service.list_groups(session=session, limit=limit, offset=offset, kind=kind)
    return [CrashGroupOut.model_validate(g, from_attributes=True) for g in groups]


@router.get("/{signature}", response_model=CrashGroupDetail, responses=answers(308, 404, 422))
def get_crash(signature: Signature, session: SessionDep) -> CrashGroupDetail:
    """A crash group with its jobs (``job_ids``, ``cells``), newest crash first, and the builds they ran on.

    A cell's ``log`` is the URL of its job's log where the log was kept, null where it was not (the service
    refused it: too large, or the worker's upload failed), so a client never follows a link to a 404."""
    group = service.get_group(session=session, signature=signature)
    jobs = service.members(session=session, group_ids=[group.id])[group.id]
    cells = [
        CrashCell(job_id=j.id, sweep_id=j.sweep_id, gpu_kind=j.gpu_kind, backend=j.backend, graph_mode=j.graph_mode,
                  method=j.method, build=j.build, log=f"/api/v1/jobs/{j.id}/log" if j.logged else None)
        for j in jobs
    ]
    return CrashGroupDetail(
        **CrashGroupOut.model_validate(group, from_attributes=True).model_dump(),
        job_ids=[j.id for j in jobs],
        builds=service.builds_of(session=session, group=group),
        cells=cells,
    )


@router.post(
    "/{signature}/merge", response_model=CrashGroupOut, responses=answers(401, 403, 404, 409, 413, 422, 429)
)
def merge_crashes(by: Admin, signature: Signature, body: MergeIn, session: SessionDep) -> CrashGroupOut:
    """Merge this group into ``into`` (admin): one cause under two signatures. Answers the merged group.

    Kept across ``draftbench rederive``, with its reason and who made it; crashes signed like this
    group later join ``into``.
    """
    group = service.merge(session=session, signature=signature, into=body.into, reason=body.reason, by=_who(by))
    return CrashGroupOut.model_validate(group, from_attributes=True)


@router.post("/{signature}/split", response_model=CrashGroupOut, responses=answers(401, 403, 404, 413, 422, 429))
def split_crashes(by: Admin, signature: Signature, body: SplitIn, session: SessionDep) -> CrashGroupOut:
    """Split the crashes of ``job_ids`` out of this group (admin): two causes under one signature.

    Answers the new group. Kept across ``draftbench rederive``, with its reason and who made it.
    """
    group = service.split(session=session, signature=signature, job_ids=body.job_ids, reason=body.reason, by=_who(by))
    return CrashGroupOut.model_validate(group, from_attributes=True)


def _who(principal: Principal) -> str:
    return f"{principal.name} ({principal.key})"[:200]
