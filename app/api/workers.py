"""The worker protocol (register, claim, heartbeat) and the list of workers and builds."""

import time

from fastapi import APIRouter, Response, status

from app.api.deps import PathWorker, RegisteringHost
from app.api.responses import answers
from app.jobs import queue
from app.metrics.service import MetricsDep
from app.schemas.worker import (
    BuildOut,
    ClaimedJob,
    HeartbeatRequest,
    HeartbeatResponse,
    RegisterRequest,
    WorkerOut,
    WorkerRegistered,
)
from app.sessions import SessionDep, SettingsDep
from app.workers import service

router = APIRouter(prefix="/api/v1", tags=["workers"])


@router.post(
    "/workers",
    response_model=WorkerRegistered,
    status_code=status.HTTP_201_CREATED,
    responses=answers(401, 403, 409, 413, 422, 429),
)
def register(body: RegisterRequest, by: RegisteringHost, session: SessionDep, settings: SettingsDep) -> WorkerRegistered:
    """A worker announces its host, GPU kinds and builds; the answer holds its id and its own credential.

    Only a host's token registers (``worker`` scope, or admin), never a worker's credential (403).
    Every later call for this worker (claim, heartbeat, log, complete) must carry that credential,
    which dies with the token that registered it.
    409 when a build label is already recorded with another vLLM version.
    """
    worker, credential = service.register(session=session, request=body, issued_by=by.token_id)
    out = service.to_out(worker, lease_seconds=settings.lease_seconds)
    return WorkerRegistered(**out.model_dump(), credential=credential, lease_seconds=settings.lease_seconds)


@router.get("/workers", response_model=list[WorkerOut], responses=answers(422))
def list_workers(session: SessionDep, settings: SettingsDep) -> list[WorkerOut]:
    """Every registered worker; ``alive`` when heard from within the lease (``DRAFTBENCH_LEASE_SECONDS``)."""
    return [service.to_out(w, lease_seconds=settings.lease_seconds) for w in service.list_all(session=session)]


@router.post(
    "/workers/{worker_id}/claim",
    response_model=ClaimedJob,
    responses={204: {"description": "no job is waiting for this worker"}, **answers(401, 403, 404, 422, 429)},
)
def claim(worker_id: PathWorker, session: SessionDep, settings: SettingsDep, metrics: MetricsDep) -> ClaimedJob | Response:
    """Lease the next queued job matching the worker's GPU kinds, builds and GPU count.

    Among those: the second half of a pair whose first half this worker ran, then highest priority, then
    fairness between sweeps, then the oldest (see app.jobs.queue). A claim counts as a heartbeat.
    """
    started = time.perf_counter()
    worker = service.get(session=session, worker_id=worker_id)
    service.touch(session=session, worker=worker)
    job = queue.claim(
        session=session, worker_id=worker.id, gpu_kinds=worker.gpu_kinds, builds=worker.builds,
        lease_seconds=settings.lease_seconds, gpu_count=worker.gpu_count,
    )
    metrics.claim_seconds.labels(outcome="empty" if job is None else "job").observe(time.perf_counter() - started)
    if job is None:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    return ClaimedJob(job_id=job.id, sweep_id=job.sweep_id, attempt=job.attempts, spec=job.spec, gpus_needed=job.gpus_needed)


@router.post(
    "/workers/{worker_id}/heartbeat", response_model=HeartbeatResponse, responses=answers(401, 403, 404, 413, 422, 429)
)
def heartbeat(worker_id: PathWorker, body: HeartbeatRequest, session: SessionDep, metrics: MetricsDep) -> HeartbeatResponse:
    """The worker is alive; the answer lists which of the jobs it runs it must stop (cancelled or requeued)."""
    metrics.heartbeats.inc()
    worker = service.get(session=session, worker_id=worker_id)
    service.touch(session=session, worker=worker)
    return HeartbeatResponse(stop=queue.to_stop(session=session, worker_id=worker.id, job_ids=body.job_ids))


@router.get("/builds", response_model=list[BuildOut], responses=answers(422))
def list_builds(session: SessionDep) -> list[BuildOut]:
    """Builds some worker registered or an imported sweep ran on, with the vLLM version first recorded for each."""
    return [BuildOut.model_validate(b) for b in service.list_builds(session=session)]
