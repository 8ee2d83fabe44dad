"""Recording crashes under their group, reading the groups back, and merging and splitting them by hand."""

import codecs
import zlib
from collections.abc import Iterator
from datetime import datetime

from sqlalchemy import ColumnElement, Row, func, select
from sqlalchemy.orm import Session

from app import newest
from app.crashes import overrides
from app.crashes.context import cell_context
from app.crashes.excerpt import excerpt
from app.crashes.signatures import CrashInfo, signature_for
from app.enums import CrashKind
from app.errors import ConflictError, InputError, MovedError, NotFoundError
from app.models import Crash, CrashOverride, CrashSignature, Job, JobLog, utcnow
from app.schemas import text
from app.schemas.cell import JobOutcome


def record(*, session: Session, job: Job, outcome: JobOutcome, log: str, now: datetime) -> Crash:
    """Sign the crash from its log and what its cell ran, and add it to its group (created on first sight).

    The group is the signature's, unless a merge or split made by hand sends it elsewhere
    (``app.crashes.overrides``). ``now`` is when the cell died: an imported crash keeps the time it
    ran, so a group's first and last seen are run times in whatever order crashes arrive.
    """
    info = sign(job=job, log=log, exit_code=outcome.exit_code, signal=outcome.signal, timed_out=outcome.timed_out)
    target = overrides.group_of(info.signature, job.id, load_overrides(session=session))
    group = session.scalar(select(CrashSignature).where(CrashSignature.signature == target).with_for_update())
    if group is None:
        group = new_group(target, info, now)
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
        excerpt=excerpt_of(log, info),
        duration_s=outcome.duration_s,
        created_at=now,
    )
    session.add(crash)
    return crash


def excerpt_of(log: str, info: CrashInfo) -> str | None:
    """The lines of a crash's log a reader needs first, around its exception (None without a log), made
    storable as the signature is (``app.schemas.text.clean``)."""
    if not log:
        return None
    return text.clean(excerpt(log, info.exception_type or info.message[:40])) or None


def sign(*, job: Job, log: str, exit_code: int | None, signal: int | None, timed_out: bool) -> CrashInfo:
    """The signature of a job's crash: its log, how it ended, and what the log says the cell ran.

    The log is read made storable (``app.schemas.text.clean``): a message quoting a NUL byte once made
    PostgreSQL refuse the crash, and the job failed on every worker that claimed it.
    """
    log = text.clean(log)
    context = cell_context(log=log, method=job.method, backend=job.backend, graph_mode=job.graph_mode)
    return signature_for(log, exit_code=exit_code, signal=signal, timed_out=timed_out, context=context)


def new_group(signature: str, info: CrashInfo, now: datetime) -> CrashSignature:
    """An empty group described by ``info`` (its first crash's)."""
    group = CrashSignature(signature=signature, first_seen=now, last_seen=now, count=0)
    describe(group, info)
    return group


def describe(group: CrashSignature, info: CrashInfo) -> None:
    """The group's title, kind, exception, message and frames, from one of its crashes."""
    group.title = info.title
    group.kind = info.kind
    group.exception_type = info.exception_type and info.exception_type[:255]
    group.message = info.message
    group.frames = list(info.frames)


def load_overrides(*, session: Session) -> list[overrides.Override]:
    """Every merge and split, in the order they were made."""
    rows = session.scalars(select(CrashOverride).order_by(CrashOverride.id))
    return [overrides.Override(o.action, o.signature, o.into, frozenset(o.job_ids)) for o in rows]


def merge(*, session: Session, signature: str, into: str, reason: str, by: str) -> CrashSignature:
    """Move every crash of group ``signature`` into group ``into`` and drop the emptied group.

    Kept as an override: both groups' crashes stay together, and crashes signed ``signature`` later
    join ``into``. 404 for an unknown group; 409 for a group merged into itself.
    """
    if signature == into:
        raise ConflictError("a crash group cannot be merged into itself")
    source, target = get_group(session=session, signature=signature), get_group(session=session, signature=into)
    members = [*source.crashes, *target.crashes]
    session.add(CrashOverride(action=overrides.MERGE, signature=signature, into=into,
                              job_ids=sorted(c.job_id for c in members), reason=reason, created_by=by))
    _move(session, source.crashes, target)
    session.delete(source)
    return target


def split(*, session: Session, signature: str, job_ids: list[int], reason: str, by: str) -> CrashSignature:
    """Move the crashes of ``job_ids`` out of group ``signature`` into a new group of their own.

    The new group keeps the old one's description, its title marked as split; an emptied group is
    dropped. 404 for an unknown group; 422 naming ``job_ids`` for a job whose crash is not in it.
    """
    source = get_group(session=session, signature=signature)
    wanted = set(job_ids)
    leaving = [crash for crash in source.crashes if crash.job_id in wanted]
    missing = wanted - {crash.job_id for crash in leaving}
    if missing:
        raise InputError(["job_ids"], f"jobs {sorted(missing)} have no crash in group {signature}")
    into = overrides.split_signature(signature, wanted)
    session.add(CrashOverride(action=overrides.SPLIT, signature=signature, into=into, job_ids=sorted(wanted),
                              reason=reason, created_by=by))
    target = CrashSignature(
        signature=into, title=f"{source.title} (split)"[:300], kind=source.kind, exception_type=source.exception_type,
        message=source.message, frames=source.frames, first_seen=leaving[0].created_at,
        last_seen=leaving[0].created_at, count=0,
    )
    session.add(target)
    _move(session, leaving, target)
    if not source.crashes:
        session.delete(source)
    return target


def _move(session: Session, crashes: list[Crash], target: CrashSignature) -> None:
    """Put ``crashes`` in ``target`` and recount both sides' counts and first and last seen."""
    sources = {crash.signature_group for crash in crashes}
    for crash in list(crashes):
        crash.signature_group = target
    session.flush()
    for group in {*sources, target}:
        recount(group)


def recount(group: CrashSignature) -> None:
    """The group's count and first and last seen, from its crashes."""
    times = [crash.created_at for crash in group.crashes]
    group.count = len(times)
    if times:
        group.first_seen, group.last_seen = min(times), max(times)


def store_log(*, session: Session, job_id: int, text: str) -> None:
    """Keep a job's log compressed (replacing one uploaded before: the worker streams it)."""
    data = text.encode()
    row = session.get(JobLog, job_id)
    if row is None:
        session.add(JobLog(job_id=job_id, compressed=zlib.compress(data, 6), size=len(data)))
    else:
        row.compressed, row.size, row.created_at = zlib.compress(data, 6), len(data), utcnow()


def read_log(*, session: Session, job_id: int) -> str | None:
    """A job's whole log, decompressed: for reading it once (signing, rederive, export), not for pages."""
    row = session.get(JobLog, job_id)
    return None if row is None else zlib.decompress(row.compressed).decode(errors="replace")


def log_kept(job_id: ColumnElement[int]) -> ColumnElement[bool]:
    """Whether the log of job ``job_id`` was kept, as a column of a statement that reads jobs: a page links a log only
    where one is (a 404 otherwise), and a worker reports a crash without its log when the service refused the log.
    A scalar subquery on the log's primary key, not EXISTS: PostgreSQL may answer an EXISTS by hashing the id of every
    stored log, a read of the whole table of logs for each page."""
    return select(JobLog.job_id).where(JobLog.job_id == job_id).scalar_subquery().is_not(None)


def compressed_log(*, session: Session, job_id: int) -> bytes | None:
    """A job's log as stored (zlib), for streaming it out with ``log_chunks``."""
    return session.scalar(select(JobLog.compressed).where(JobLog.job_id == job_id))


LOG_CHUNK = 64 * 1024


def log_chunks(compressed: bytes) -> Iterator[str]:
    """The log's text in pieces of at most ``LOG_CHUNK`` decompressed bytes: memory stays at the
    compressed size plus one piece, whatever the log's size (a 32 MiB log of one repeated line
    compresses to a few KiB). UTF-8 split between pieces is decoded whole (an incremental decoder)."""
    inflate = zlib.decompressobj()
    decode = codecs.getincrementaldecoder("utf-8")(errors="replace")
    data = compressed
    while data:
        piece = inflate.decompress(data, LOG_CHUNK)
        data = inflate.unconsumed_tail
        if piece:
            yield decode.decode(piece)
    yield decode.decode(inflate.flush(), final=True)


def excerpts(*, session: Session, job_ids: list[int]) -> dict[int, str | None]:
    """The stored excerpt of each crash of ``job_ids`` (a page's few: each group's newest, ``members``' first), by job."""
    return dict(session.execute(select(Crash.job_id, Crash.excerpt).where(Crash.job_id.in_(job_ids))).all())


def list_groups(*, session: Session, limit: int, offset: int, kind: CrashKind | None = None) -> list[CrashSignature]:
    """Groups newest first (``app.newest.CRASH_GROUPS``: most recently seen), of one crash kind or all."""
    stmt = select(CrashSignature).order_by(*newest.CRASH_GROUPS)
    if kind is not None:
        stmt = stmt.where(CrashSignature.kind == kind)
    return list(session.scalars(stmt.limit(limit).offset(offset)))


def get_group(*, session: Session, signature: str) -> CrashSignature:
    """The group ``signature``; ``MovedError`` naming the group it was merged into (followed through later merges),
    where an admin merged it away, so links written before the merge still lead to its crashes; else 404."""
    group = session.scalar(select(CrashSignature).where(CrashSignature.signature == signature))
    if group is not None:
        return group
    merged = _merged_into(session, signature)
    if merged is None:
        raise NotFoundError("crash signature", signature)
    raise MovedError("crash group", signature, merged)


def _merged_into(session: Session, signature: str) -> str | None:
    """The existing group a merged-away ``signature`` now lives in: its newest merge's ``into``, followed through the
    merges of that one (at most as many as are stored, so a cycle cannot loop); None where it was never merged."""
    seen = set()
    into = signature
    while into not in seen:
        seen.add(into)
        into = session.scalar(select(CrashOverride.into).where(CrashOverride.action == overrides.MERGE,
                                                               CrashOverride.signature == into)
                              .order_by(CrashOverride.id.desc()).limit(1))
        if into is None:
            return None
        if session.scalar(select(CrashSignature.id).where(CrashSignature.signature == into)) is not None:
            return into
    return None


def builds_of(*, session: Session, group: CrashSignature) -> list[str]:
    """The distinct builds a group's crashes ran on, sorted."""
    return sorted(session.scalars(select(func.distinct(Job.build)).join(Crash).where(Crash.signature_id == group.id)))


def groups_in(*, session: Session, job_ids: list[int] | None, limit: int) -> list[CrashSignature]:
    """Groups with a crash among ``job_ids`` (all groups when None), newest first (``app.newest.CRASH_GROUPS``)."""
    stmt = select(CrashSignature).order_by(*newest.CRASH_GROUPS)
    if job_ids is not None:
        stmt = stmt.where(CrashSignature.id.in_(select(Crash.signature_id).where(Crash.job_id.in_(job_ids))))
    return list(session.scalars(stmt.limit(limit)))


def members(*, session: Session, group_ids: list[int]) -> dict[int, list[Row]]:
    """Each group's jobs (id, sweep_id, build, gpu_kind, backend, graph_mode, method, and ``logged``: whether its log
    was kept, for a worker reports a crash without its log when the service refused the log), newest crash first
    (``app.newest.CRASHES``), in one query: rows, not ORM jobs, so a group of thousands of crashes loads none of their
    configs."""
    found: dict[int, list[Row]] = {g: [] for g in group_ids}
    stmt = (select(Crash.signature_id, Job.id, Job.sweep_id, Job.build, Job.gpu_kind, Job.backend, Job.graph_mode, Job.method,
                   log_kept(Job.id).label("logged"))
            .join(Job, Job.id == Crash.job_id).where(Crash.signature_id.in_(group_ids)))
    for row in session.connection().execute(stmt.order_by(*newest.CRASHES)):
        found[row.signature_id].append(row)
    return found
