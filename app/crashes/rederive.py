"""Everything read from stored logs, read again with today's rules: what ran, and the crashes' groups.

``draftbench rederive`` runs it after the rules of ``app.vllmlog`` or ``app.crashes`` change. A result with a stored log
gets its resolved backends, graph modes, draft eagerness and asynchronous scheduling again (``app.vllmlog.ran``); every
crash is signed again from its log and placed by the merges and splits made by hand (``app.crashes.overrides``), which
therefore survive. Groups that no crash is left in are dropped. What changed is returned, so that a caller can show it
or roll it back (a dry run).
"""

from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.crashes import overrides, service
from app.crashes.signatures import CrashInfo
from app.enums import JobState
from app.models import Crash, CrashSignature, Job, JobLog, Result
from app.vllmlog.ran import parse_log

RESOLVED = (
    "resolved_backend", "resolved_draft_backend", "resolved_graph_mode", "resolved_draft_graph_mode",
    "graph_downgraded", "draft_eager", "async_scheduling_off",
)


@dataclass(frozen=True)
class ResultMove:
    job_id: int
    field: str
    old: object
    new: object


@dataclass(frozen=True)
class CrashMove:
    job_id: int
    old: str  # the group's signature before
    new: str  # and after
    title: str  # the new group's


@dataclass
class Report:
    results_read: int = 0
    crashes_read: int = 0
    results: list[ResultMove] = field(default_factory=list)
    crashes: list[CrashMove] = field(default_factory=list)
    created: list[str] = field(default_factory=list)  # signatures of groups new to the database
    emptied: list[str] = field(default_factory=list)  # signatures of groups dropped, no crash left


def rederive(*, session: Session) -> Report:
    """Read again every result that has a stored log and every crash; change the rows; say what moved.

    Writes in ``session`` without committing. Reads one log at a time.
    """
    report = Report()
    _results(session, report)
    _crashes(session, report)
    return report


def _results(session: Session, report: Report) -> None:
    logged = select(JobLog.job_id)
    rows = session.execute(select(Result, Job).join(Result.job).where(Job.id.in_(logged)).order_by(Result.id)).all()
    for result, job in rows:
        log = service.read_log(session=session, job_id=job.id) or ""
        resolved = parse_log(log, backend=job.backend, graph_mode=job.graph_mode, method=job.method)
        for name in RESOLVED:
            old, new = getattr(result, name), getattr(resolved, name)
            if old != new:
                report.results.append(ResultMove(job.id, name, old, new))
                setattr(result, name, new)
        result.ran = resolved.model_dump(mode="json")
        report.results_read += 1


def _crashes(session: Session, report: Report) -> None:
    made = service.load_overrides(session=session)
    groups = {group.signature: group for group in session.scalars(select(CrashSignature))}
    placed: dict[str, list[tuple[Crash, CrashInfo]]] = {}
    for crash, job in session.execute(select(Crash, Job).join(Crash.job).order_by(Crash.id)).all():
        log = service.read_log(session=session, job_id=job.id) or ""
        info = service.sign(
            job=job, log=log, exit_code=crash.exit_code, signal=crash.signal, timed_out=job.state is JobState.TIMED_OUT
        )
        crash.excerpt = service.excerpt_of(log, info)
        placed.setdefault(overrides.group_of(info.signature, job.id, made), []).append((crash, info))
        report.crashes_read += 1
    for signature, members in placed.items():
        # A group is described by a crash signed with its signature; a group that only overrides
        # fill (a split's) keeps the description it was given.
        own = next((info for _, info in members if info.signature == signature), None)
        group = groups.get(signature)
        if group is None:
            group = groups[signature] = service.new_group(signature, own or members[0][1], members[0][0].created_at)
            session.add(group)
            report.created.append(signature)
        elif own is not None:
            service.describe(group, own)
        for crash, info in members:
            if crash.signature_group is not group:
                report.crashes.append(CrashMove(crash.job_id, crash.signature_group.signature, signature, group.title))
                crash.signature_group = group
            crash.kind, crash.message = info.kind, info.message
    session.flush()
    for signature, group in groups.items():
        service.recount(group)
        if group.count == 0:
            report.emptied.append(signature)
            session.delete(group)
