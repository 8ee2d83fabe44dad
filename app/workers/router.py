"""The worker protocol (register, claim, heartbeat) and the list of workers and builds."""

import time

from fastapi import APIRouter, Response, status
from sqlalchemy import select

from app.deps import SessionDep, SettingsDep, WorkerAuth
from app.jobs import queue
from app.metrics.service import MetricsDep
from app.models import Build
from app.schemas.worker import ClaimedJob, HeartbeatRequest, HeartbeatResponse, RegisterRequest, WorkerOut
from app.workers import service

router = APIRouter(prefix="/api/v1", tags=["workers"])


@router.post("/workers", response_model=WorkerOut, status_code=status.HTTP_201_CREATED, dependencies=[WorkerAuth])
def register(request: RegisterRequest, session: SessionDep, settings: SettingsDep) -> WorkerOut:
    """A worker announces its host, GPU kinds and builds; the answer's id is used in every later call."""
    return service.to_out(service.register(session=session, request=request), stale_seconds=settings.worker_stale_seconds)


@router.get("/workers", response_model=list[WorkerOut])
def list_workers(session: SessionDep, settings: SettingsDep) -> list[WorkerOut]:
    return [service.to_out(w, stale_seconds=settings.worker_stale_seconds) for w in service.list_all(session=session)]


@router.post(
    "/workers/{worker_id}/claim",
    response_model=ClaimedJob,
    responses={204: {"description": "no job is waiting for this worker"}},
    dependencies=[WorkerAuth],
)
def claim(worker_id: int, session: SessionDep, settings: SettingsDep, metrics: MetricsDep) -> ClaimedJob | Response:
    """Lease the next queued job matching the worker's GPU kinds, builds and GPU count (expired leases are requeued first).

    Among those: highest priority, then fairness between sweeps, then the oldest (see app.jobs.queue).
    """
    started = time.perf_counter()
    worker = service.get(session=session, worker_id=worker_id)
    service.touch(session=session, worker=worker)
    queue.requeue_expired(session=session)
    job = queue.claim(
        session=session,
        worker_id=worker.id,
        gpu_kinds=worker.gpu_kinds,
        builds=worker.builds,
        gpu_count=worker.gpu_count,
        lease_seconds=settings.lease_seconds,
    )
    metrics.claim_seconds.labels(outcome="empty" if job is None else "job").observe(time.perf_counter() - started)
    if job is None:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    return ClaimedJob(
        job_id=job.id,
        sweep_id=job.sweep_id,
        attempt=job.attempts,
        lease_expires_at=job.lease_expires_at,
        cell=job.config,
        gpus_needed=job.gpus_needed,
    )


@router.post("/workers/{worker_id}/heartbeat", response_model=HeartbeatResponse, dependencies=[WorkerAuth])
def heartbeat(
    worker_id: int, body: HeartbeatRequest, session: SessionDep, settings: SettingsDep, metrics: MetricsDep
) -> HeartbeatResponse:
    """Renew the leases of the jobs the worker runs; the answer lists those it must stop."""
    metrics.heartbeats.inc()
    worker = service.get(session=session, worker_id=worker_id)
    service.touch(session=session, worker=worker)
    stop = queue.renew(session=session, worker_id=worker.id, job_ids=body.job_ids, lease_seconds=settings.lease_seconds)
    return HeartbeatResponse(stop=stop)


@router.get("/builds", response_model=list[dict])
def list_builds(session: SessionDep) -> list[dict]:
    return [
        {"label": b.label, "vllm_version": b.vllm_version, "last_seen_at": b.last_seen_at.isoformat()}
        for b in session.scalars(select(Build).order_by(Build.label))
    ]
