"""``/api/v1/jobs``: read jobs (a worker's log and result reports are results' routes)."""

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import ExistingJob
from app.api.responses import answers
from app.enums import JobState
from app.jobs import service
from app.schemas.ids import Id
from app.schemas.worker import JobOut
from app.sessions import SessionDep

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])


@router.get("", response_model=list[JobOut], responses=answers(422))
def list_jobs(
    session: SessionDep,
    sweep_id: Annotated[Id | None, Query()] = None,
    state: JobState | None = None,
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> list[JobOut]:
    """Jobs in the order they were stored (by id), not newest first: a page at an offset stays the same while new
    jobs are added, so paging through them misses none."""
    jobs = service.list_jobs(session=session, sweep_id=sweep_id, state=state, limit=limit, offset=offset)
    return [JobOut.model_validate(job) for job in jobs]


@router.get("/{job_id}", response_model=JobOut, responses=answers(404, 422))
def get_job(job: ExistingJob) -> JobOut:
    return JobOut.model_validate(job)
