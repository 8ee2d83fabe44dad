"""Worker registration and liveness; the builds they bring."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth import service as tokens
from app.enums import TokenScope
from app.errors import ConflictError, NotFoundError
from app.models import Build, Worker, utcnow
from app.schemas.worker import RegisterRequest, WorkerOut
from app.workers import liveness

# What ``draftbench build create`` records about a build, as BuildInfo and the Build row name them.
BUILD_FACTS = ("kind", "base", "patch_sha256", "source", "commit", "committed_at")


def register(*, session: Session, request: RegisterRequest, issued_by: int | None) -> tuple[Worker, str]:
    """A worker process announces itself; returns it and its own credential (shown once).

    The credential is issued by the registering host's token ``issued_by`` and dies with it.

    Its builds become valid targets for sweeps, with how each was made (``BUILD_FACTS``). A build
    label keeps the vLLM version and facts first recorded for it: a worker reporting another value
    gets ConflictError (409), so no worker can rewrite what a build is; facts missing on either side
    are filled in.
    """
    now = utcnow()
    for info in request.builds:
        build = session.scalar(select(Build).where(Build.label == info.label))
        if build is None:
            facts = {name: getattr(info, name) for name in ("vllm_version", *BUILD_FACTS)}
            session.add(Build(label=info.label, created_at=now, last_seen_at=now, **facts))
            continue
        for name in ("vllm_version", *BUILD_FACTS):
            recorded, reported = getattr(build, name), getattr(info, name)
            if recorded and reported and _comparable(recorded) != _comparable(reported):
                raise ConflictError(
                    f"build {info.label!r} is recorded with {name} {recorded}, this worker's has "
                    f"{reported}: register it under another label"
                )
            setattr(build, name, recorded or reported)
        build.last_seen_at = now
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
    session.flush()
    _, credential = tokens.create(
        session=session,
        name=f"worker {worker.id} ({worker.name})",
        scopes=[TokenScope.WORKER],
        issued_by=issued_by,
        worker_id=worker.id,
    )
    return worker, credential


def get(*, session: Session, worker_id: int) -> Worker:
    worker = session.get(Worker, worker_id)
    if worker is None:
        raise NotFoundError("worker", worker_id)
    return worker


def touch(*, session: Session, worker: Worker) -> None:
    """A heartbeat or a claim: the worker is alive now."""
    worker.last_heartbeat_at = utcnow()


def list_all(*, session: Session) -> list[Worker]:
    return list(session.scalars(select(Worker).order_by(Worker.id)))


def list_builds(*, session: Session) -> list[Build]:
    return list(session.scalars(select(Build).order_by(Build.label)))


def commit_dates(*, session: Session, labels: Iterable[str]) -> dict[str, datetime]:
    """When each build's commit was made, for the builds that recorded it."""
    rows = session.execute(select(Build.label, Build.committed_at).where(Build.label.in_(sorted(set(labels))),
                                                                         Build.committed_at.is_not(None)))
    return dict(rows.tuples().all())


def build_labels(*, session: Session) -> list[str]:
    return list(session.scalars(select(Build.label).order_by(Build.label)))


def to_out(worker: Worker, *, lease_seconds: float, now: datetime | None = None) -> WorkerOut:
    return WorkerOut(
        id=worker.id,
        name=worker.name,
        host=worker.host,
        gpu_kinds=worker.gpu_kinds,
        gpu_count=worker.gpu_count,
        builds=worker.builds,
        registered_at=worker.registered_at,
        last_heartbeat_at=worker.last_heartbeat_at,
        alive=liveness.is_alive(worker.last_heartbeat_at, now=now or utcnow(), lease_seconds=lease_seconds),
    )


@dataclass(frozen=True)
class Need:
    """Jobs that wait for one kind of worker: a GPU kind, a build and at least ``gpus`` GPUs, and for paired jobs the
    build of their partners (app.sweeps.pairing: one worker runs both)."""

    gpu_kind: str
    build: str
    gpus: int
    jobs: int
    partner_build: str | None = None


def unserved(*, session: Session, needs: Iterable[Need], lease_seconds: float) -> list[str]:
    """A sentence for each need that no live worker can serve (its jobs would wait for one to register)."""
    now = utcnow()
    live = session.scalars(select(Worker).where(liveness.alive(now=now, lease_seconds=lease_seconds))).all()
    warnings = []
    for need in needs:
        if any(
            need.gpu_kind in worker.gpu_kinds and need.build in worker.builds and need.gpus <= worker.gpu_count
            and (need.partner_build is None or need.partner_build in worker.builds)
            for worker in live
        ):
            continue
        gpus = f" with {need.gpus} GPUs" if need.gpus > 1 else ""
        both = f" and {need.partner_build} (paired runs need both on one worker)" if need.partner_build else ""
        warnings.append(
            f"no live worker serves GPU kind {need.gpu_kind} with build {need.build}{both}{gpus}: "
            f"{need.jobs} job(s) wait until one registers"
        )
    return warnings


def _comparable(value: object) -> object:
    """A fact as stored and as reported compare equal: SQLite gives datetimes back without their zone (UTC)."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    return value
