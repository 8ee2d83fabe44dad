"""Alerts: each cell's history across builds, and the regression still open at its end.

A cell's history is its tokens/s (the median of its repeats) and its acceptance on each build of its GPU
kind, builds in commit order when every one of them recorded its commit date, else in the order the cell
last ran on them (as ``/history`` places them). ``changepoints.open_regression`` finds a drop
still open at the end; an alert names it by its metric, cell and first bad build, so an acknowledgement
(``AlertAck``) holds until the drop is fixed or its first bad build moves.
"""

import hashlib
import threading
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.changepoints import open_regression
from app.analysis.verdicts import DEFAULT_THRESHOLD
from app.cells import service as cells_service
from app.cells.pooling import PooledCell
from app.cells.scope import CellScope
from app.db import session_scope
from app.errors import ConflictError, NotFoundError
from app.models import AlertAck, Job, utcnow
from app.workers import service as workers

# A drop smaller than this (relative) is not an alert: the compare verdict's default change of tokens/s.
MIN_CHANGE = DEFAULT_THRESHOLD
METRICS = ("tokens_per_s", "acceptance")
# Fitted on their logarithm: a slower build is slower by a factor, and the noise grows with the level.
RELATIVE = frozenset({"tokens_per_s"})


@dataclass(frozen=True)
class Alert:
    id: str
    metric: str
    cell: PooledCell  # the cell on the newest build
    first_bad_build: str
    last_good_build: str
    before: float
    after: float
    builds: int
    acknowledged: AlertAck | None

    @property
    def change(self) -> float:
        return self.after / self.before - 1.0


def find(*, session: Session) -> list[Alert]:
    """Every open regression, the largest drop first, each with its acknowledgement if any.

    Reads every cell of every build (``app.cells.service.load``): one pass, then a change-point fit per
    cell and metric (O(n^2 log n) for n builds).
    """
    histories: dict[tuple, list[PooledCell]] = defaultdict(list)
    for cell in cells_service.load(session=session, scope=CellScope()):
        if cell.ran:
            histories[cell.identity].append(cell)
    committed = workers.commit_dates(session=session, labels={c.build for h in histories.values() for c in h})
    found = []
    for key, history in histories.items():
        if all(c.build in committed for c in history):
            history.sort(key=lambda c: (committed[c.build], c.build))
        else:
            history.sort(key=lambda c: (c.ran_at is None, c.ran_at or 0, c.build))
        for metric in METRICS:
            points = [(c, _value(metric, c)) for c in history]
            points = [(c, v) for c, v in points if v is not None]
            if len(points) < 4:  # a step needs two points a side
                continue
            try:
                drop = open_regression([v for _, v in points], min_change=MIN_CHANGE, relative=metric in RELATIVE)
            except ValueError:  # every earlier level is 0 (a draft that never matched): nothing to drop from
                continue
            if drop is None:
                continue
            first_bad, last_good = points[drop.first_bad][0].build, points[drop.first_bad - 1][0].build
            ident = hashlib.sha256(repr((metric, *key, first_bad)).encode()).hexdigest()[:16]
            found.append(Alert(ident, metric, points[-1][0], first_bad, last_good, drop.before, drop.after,
                               len(points), None))
    acks = {a.alert_id: a for a in session.scalars(select(AlertAck).where(AlertAck.alert_id.in_([a.id for a in found])))}
    return sorted((_with(a, acks.get(a.id)) for a in found), key=lambda a: a.change)


def concerning(found: list[Alert], *, sweep_id: int | None = None, build: str | None = None) -> list[Alert]:
    """The alerts of ``found`` whose cell on the newest build ran in sweep ``sweep_id`` (its page, ``draftbench
    status``), and whose drop began at ``build`` or is still open at it (a build compared); None asks nothing."""
    return [a for a in found if (sweep_id is None or sweep_id in a.cell.sweep_ids)
            and (build is None or build in (a.first_bad_build, a.cell.build))]


def open_alerts(*, session: Session) -> list[Alert]:
    """The alerts not acknowledged, largest drop first, as of now: what ``/metrics`` counts.

    :func:`find` reads every cell; its answer changes only when a job finishes or an alert is
    acknowledged, so it is kept per database and process under a key of exactly those (the finished
    jobs' count and newest finish, the acknowledgements' count): a scrape between results costs two
    counts. The first after a result reads every cell: 3.2 s over 102,611 results on SQLite on the
    2-core development machine (``benchmarks/dashboard_load.py``).
    """
    database = str(session.get_bind().url)
    key = (*session.execute(select(func.count(), func.max(Job.finished_at)).where(Job.finished_at.is_not(None))).one(),
           session.scalar(select(func.count()).select_from(AlertAck)))
    with _OPEN_LOCK:
        known = _OPEN.get(database)
    if known is not None and known.key == key:
        return known.alerts
    found = [a for a in find(session=session) if a.acknowledged is None]
    with _OPEN_LOCK:
        _OPEN[database] = _Found(key, found, utcnow())
    return found


def latest_open(*, session: Session) -> tuple[list[Alert], datetime]:
    """What :func:`open_alerts` last found for this database and when, without reading the history again: the
    overview page shows this, and :func:`refresh` keeps it current on the service's schedule. Only the first
    call of a process reads the history."""
    with _OPEN_LOCK:
        known = _OPEN.get(str(session.get_bind().url))
    if known is None:
        return open_alerts(session=session), utcnow()
    return known.alerts, known.at


def refresh(sessions: sessionmaker[Session]) -> None:
    """:func:`open_alerts` in its own session, for the service's schedule (``app.periodic``)."""
    with session_scope(sessions) as session:
        open_alerts(session=session)


def open_counts(*, session: Session) -> dict[str, int]:
    """Open, unacknowledged alerts by metric, for ``/metrics``."""
    found = open_alerts(session=session)
    return {metric: sum(a.metric == metric for a in found) for metric in METRICS}


@dataclass(frozen=True)
class _Found:
    key: tuple
    alerts: list[Alert]
    at: datetime


_OPEN: dict[str, _Found] = {}  # by database: the last open_alerts answer
_OPEN_LOCK = threading.Lock()  # scrapes, pages and the schedule run on several threads


def acknowledge(*, session: Session, alert_id: str, reason: str, by: str) -> Alert:
    """Acknowledge an open alert with a reason. NotFoundError when no open alert has this id; ConflictError when
    it is acknowledged already."""
    alert = next((a for a in find(session=session) if a.id == alert_id), None)
    if alert is None:
        raise NotFoundError("open alert", alert_id)
    if alert.acknowledged is not None:
        raise ConflictError(f"alert {alert_id} was acknowledged by {alert.acknowledged.created_by}: {alert.acknowledged.reason}")
    ack = AlertAck(alert_id=alert_id, reason=reason, created_by=by)
    session.add(ack)
    session.flush()
    return _with(alert, ack)


def _with(alert: Alert, ack: AlertAck | None) -> Alert:
    return Alert(alert.id, alert.metric, alert.cell, alert.first_bad_build, alert.last_good_build, alert.before,
                 alert.after, alert.builds, ack)


def _value(metric: str, cell: PooledCell) -> float | None:
    if metric == "tokens_per_s":
        # A cell that produced nothing has no level to fit a ratio on.
        return cell.speed.median if cell.speed and cell.speed.median > 0 else None
    return cell.accepted / cell.draft_tokens if cell.draft_tokens else None
