"""Recording crashes under their signature group, and reading the groups back."""

import zlib
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.crashes.signatures import signature_for
from app.enums import CrashKind
from app.errors import NotFoundError
from app.models import Crash, CrashSignature, Job, JobLog, utcnow
from app.schemas.cell import CellOutcome


def record(*, session: Session, job: Job, outcome: CellOutcome, log: str, now: datetime) -> Crash:
    """Sign the crash from its log and add it to its group (created on first sight).

    ``now`` is when the cell died: an imported crash keeps the time it ran, so a group's first and
    last seen are run times in whatever order crashes arrive.
    """
    info = signature_for(log, exit_code=outcome.exit_code, signal=outcome.signal, timed_out=outcome.timed_out)
    group = session.scalar(select(CrashSignature).where(CrashSignature.signature == info.signature).with_for_update())
    if group is None:
        group = CrashSignature(
            signature=info.signature,
            kind=info.kind,
            exception_type=info.exception_type and info.exception_type[:255],
            message=info.message,
            frames=list(info.frames),
            first_seen=now,
            last_seen=now,
            count=0,
        )
        session.add(group)
    group.count += 1
    group.first_seen = min(group.first_seen, now)
    group.last_seen = max(group.last_seen, now)
    crash = Crash(
        job=job,
        signature_group=group,
        kind=info.kind,
        exit_code=outcome.exit_code,
        signal=outcome.signal,
        message=info.message,
        duration_s=outcome.duration_s,
        created_at=now,
    )
    session.add(crash)
    return crash


def store_log(*, session: Session, job_id: int, text: str) -> None:
    data = text.encode()
    row = session.get(JobLog, job_id)
    if row is None:
        session.add(JobLog(job_id=job_id, compressed=zlib.compress(data, 6), size=len(data)))
    else:
        row.compressed, row.size, row.created_at = zlib.compress(data, 6), len(data), utcnow()


def read_log(*, session: Session, job_id: int) -> str | None:
    row = session.get(JobLog, job_id)
    return None if row is None else zlib.decompress(row.compressed).decode(errors="replace")


def list_groups(*, session: Session, limit: int, offset: int, kind: CrashKind | None = None) -> list[CrashSignature]:
    """Groups most recently seen first, of one crash kind or all."""
    stmt = select(CrashSignature).order_by(CrashSignature.last_seen.desc(), CrashSignature.id.desc())
    if kind is not None:
        stmt = stmt.where(CrashSignature.kind == kind)
    return list(session.scalars(stmt.limit(limit).offset(offset)))


def get_group(*, session: Session, signature: str) -> CrashSignature:
    group = session.scalar(select(CrashSignature).where(CrashSignature.signature == signature))
    if group is None:
        raise NotFoundError("crash signature", signature)
    return group


def affected(*, session: Session, group: CrashSignature) -> tuple[list[Job], list[str]]:
    """The jobs in a group and the distinct builds they ran on."""
    in_group = Crash.signature_id == group.id
    jobs = list(session.scalars(select(Job).join(Crash).where(in_group).order_by(Job.id)))
    builds = list(session.scalars(select(func.distinct(Job.build)).join(Crash).where(in_group)))
    return jobs, sorted(builds)
