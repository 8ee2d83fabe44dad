"""Worker registration and liveness; the builds they bring."""

from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import NotFoundError
from app.models import Build, Worker, utcnow
from app.schemas.worker import RegisterRequest, WorkerOut


def register(*, session: Session, request: RegisterRequest) -> Worker:
    """A worker process announces itself; its builds become valid targets for sweeps."""
    now = utcnow()
    worker = Worker(
        name=request.name,
        host=request.host,
        gpu_kinds=[kind.value for kind in request.gpu_kinds],
        gpu_count=request.gpu_count,
        builds=[build.label for build in request.builds],
        registered_at=now,
        last_heartbeat_at=now,
    )
    session.add(worker)
    for info in request.builds:
        build = session.scalar(select(Build).where(Build.label == info.label))
        if build is None:
            session.add(Build(label=info.label, vllm_version=info.vllm_version, created_at=now, last_seen_at=now))
        else:
            build.vllm_version = info.vllm_version or build.vllm_version
            build.last_seen_at = now
    session.flush()
    return worker


def get(*, session: Session, worker_id: int) -> Worker:
    worker = session.get(Worker, worker_id)
    if worker is None:
        raise NotFoundError("worker", worker_id)
    return worker


def touch(*, session: Session, worker: Worker) -> None:
    worker.last_heartbeat_at = utcnow()


def list_all(*, session: Session) -> list[Worker]:
    return list(session.scalars(select(Worker).order_by(Worker.id)))


def to_out(worker: Worker, *, stale_seconds: float) -> WorkerOut:
    alive = utcnow() - worker.last_heartbeat_at < timedelta(seconds=stale_seconds)
    return WorkerOut(
        id=worker.id,
        name=worker.name,
        host=worker.host,
        gpu_kinds=worker.gpu_kinds,
        gpu_count=worker.gpu_count,
        builds=worker.builds,
        registered_at=worker.registered_at,
        last_heartbeat_at=worker.last_heartbeat_at,
        alive=alive,
    )
