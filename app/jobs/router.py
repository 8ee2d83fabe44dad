"""``/api/v1/jobs``: read jobs, upload and download a cell's log, report a finished cell."""

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.responses import PlainTextResponse
from sqlalchemy import select

from app.crashes import service as crashes
from app.deps import SessionDep, WorkerAuth
from app.enums import JobState
from app.errors import NotFoundError
from app.jobs import queue
from app.metrics.service import MetricsDep
from app.models import Job
from app.results import service as results
from app.schemas.worker import CompleteRequest, JobOut

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])


@router.get("", response_model=list[JobOut])
def list_jobs(
    session: SessionDep,
    sweep_id: int | None = None,
    state: JobState | None = None,
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> list[Job]:
    stmt = select(Job).order_by(Job.id).limit(limit).offset(offset)
    if sweep_id is not None:
        stmt = stmt.where(Job.sweep_id == sweep_id)
    if state is not None:
        stmt = stmt.where(Job.state == state)
    return list(session.scalars(stmt))


def _job(session, job_id: int) -> Job:  # noqa: ANN001
    job = session.get(Job, job_id)
    if job is None:
        raise NotFoundError("job", job_id)
    return job


@router.get("/{job_id}", response_model=JobOut)
def get_job(job_id: int, session: SessionDep) -> Job:
    return _job(session, job_id)


async def _body_text(request: Request) -> str:
    return (await request.body()).decode(errors="replace")


@router.put(
    "/{job_id}/log",
    status_code=status.HTTP_204_NO_CONTENT,
    dependencies=[WorkerAuth],
    openapi_extra={"requestBody": {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
def upload_log(
    job_id: int, text: Annotated[str, Depends(_body_text)], worker_id: Annotated[int, Query()], session: SessionDep
) -> None:
    """Store the cell's full log (compressed); only the worker holding the job may write it."""
    queue.hold(session=session, job_id=job_id, worker_id=worker_id)
    crashes.store_log(session=session, job_id=job_id, text=text)


@router.get("/{job_id}/log", response_class=PlainTextResponse)
def download_log(job_id: int, session: SessionDep) -> str:
    _job(session, job_id)
    text = crashes.read_log(session=session, job_id=job_id)
    if text is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id} has no log")
    return text


@router.post("/{job_id}/complete", response_model=JobOut, dependencies=[WorkerAuth])
def complete(job_id: int, body: CompleteRequest, session: SessionDep, metrics: MetricsDep) -> Job:
    """Report a finished cell: its result, or how it died. 409 when the worker no longer holds the job."""
    _job(session, job_id)
    job = results.complete(session=session, job_id=job_id, worker_id=body.worker_id, outcome=body.outcome)
    metrics.completed(job)
    return job
