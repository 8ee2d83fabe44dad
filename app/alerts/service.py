"""Alerts: each cell's history across builds, and the regression still open at its end.

A cell's history is its tokens/s (the median of its repeats) and its acceptance on each build of its GPU
kind, builds in commit order when every one of them recorded its commit date, else in the order the cell
last ran on them (as ``/history`` places them). ``changepoints.open_regression`` finds a drop
still open at the end; an alert names it by its metric, cell and first bad build, so an acknowledgement
(``AlertAck``) holds until the drop is fixed or its first bad build moves.

Finding them reads every cell (seconds at 100k results), and the answer changes only when a job finishes: it is
kept per database in the process and in the database (``AlertSnapshot``) under the key of the finished jobs, so a
process's first page reads one row; acknowledgements are read beside it on every call.
"""

import hashlib
import threading
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.changepoints import open_regression
from app.analysis.verdicts import DEFAULT_THRESHOLD
from app.cells import service as cells_service
from app.cells.pooling import PooledCell
from app.cells.scope import CellScope
from app.db import session_scope
from app.errors import ConflictError, NotFoundError
from app.models import AlertAck, AlertSnapshot, Job, utcnow
from app.workers import service as workers

# A drop smaller than this (relative) is not an alert: the compare verdict's default change of tokens/s.
MIN_CHANGE = DEFAULT_THRESHOLD
METRICS = ("tokens_per_s", "acceptance")
# Fitted on their logarithm: a slower build is slower by a factor, and the noise grows with the level.
RELATIVE = frozenset({"tokens_per_s"})


@dataclass(frozen=True)
class AlertCell:
    """What pages and the API show of an alert's cell on the newest build, and what :func:`concerning` asks of it."""

    build: str
    gpu_kind: str
    backend: str
    graph_mode: str
    method: str | None
    label: str
    sweep_ids: tuple[int, ...]

    @classmethod
    def of(cls, cell: PooledCell) -> "AlertCell":
        return cls(cell.build, cell.gpu_kind, cell.backend, cell.graph_mode, cell.method, cell.label, tuple(cell.sweep_ids))


@dataclass(frozen=True)
class Alert:
    id: str
    metric: str
    cell: AlertCell  # the cell on the newest build
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
    """Every open regression, the largest drop first, read from the histories now; none with its acknowledgement
    (:func:`current` has them).

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
            # By when each build first ran, as /history places it: a build run again later is no newer a build.
            history.sort(key=lambda c: (c.first_ran_at is None, c.first_ran_at or 0, c.build))
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
            found.append(Alert(ident, metric, AlertCell.of(points[-1][0]), first_bad, last_good, drop.before, drop.after,
                               len(points), None))
    return sorted(found, key=lambda a: a.change)


def concerning(found: list[Alert], *, sweep_id: int | None = None, build: str | None = None) -> list[Alert]:
    """The alerts of ``found`` whose cell on the newest build ran in sweep ``sweep_id`` (its page, ``draftbench
    status``), and whose drop began at ``build`` or is still open at it (a build compared); None asks nothing."""
    return [a for a in found if (sweep_id is None or sweep_id in a.cell.sweep_ids)
            and (build is None or build in (a.first_bad_build, a.cell.build))]


def current(*, session: Session) -> list[Alert]:
    """:func:`find`'s answer as of now, each alert with its acknowledgement if any: ``/api/v1/alerts``.

    Found again only when the key (:func:`_key`) has moved since this process or the stored snapshot found
    them: otherwise two aggregates, a row and the acknowledgements.
    """
    key = _key(session)
    known = _kept(session)
    if known is None or known.key != key:
        # Another service process may have found them for this key already (``uvicorn --workers N``).
        known = _stored(session)
        if known is None or known.key != key:
            known = _Found(key, find(session=session), utcnow())
        _keep(session, known)
    return _acknowledged(session, known.alerts)


def open_alerts(*, session: Session) -> list[Alert]:
    """The alerts not acknowledged, largest drop first, as of now: what ``/metrics`` counts."""
    return [a for a in current(session=session) if a.acknowledged is None]


def latest_open(*, session: Session) -> tuple[list[Alert], datetime]:
    """The alerts not acknowledged as last found for this database (by this process or, in a fresh one, as stored),
    and when they were found, without looking whether a job finished since: the pages show this, and
    :func:`refresh` keeps it current on the service's schedule. Only a database that has never stored its alerts
    has them found here."""
    known = _kept(session)
    if known is None:
        current(session=session)
        known = _kept(session)
    return [a for a in _acknowledged(session, known.alerts) if a.acknowledged is None], known.at


def store(*, session: Session) -> None:
    """Store the alerts as of now (:func:`current`) unless the stored ones are of the same key: the older rows
    are deleted, so that a writer overlapping another leaves two rows at most, and readers take the newest."""
    current(session=session)
    known = _kept(session)
    stored = session.execute(select(AlertSnapshot.finished_jobs, AlertSnapshot.newest_finish)
                             .order_by(AlertSnapshot.id.desc()).limit(1)).one_or_none()
    if stored is not None and tuple(stored) == known.key:
        return
    session.execute(delete(AlertSnapshot))
    session.add(AlertSnapshot(finished_jobs=known.key[0], newest_finish=known.key[1], computed_at=known.at,
                              alerts=[asdict(a) for a in known.alerts]))
    session.flush()


def refresh(sessions: sessionmaker[Session]) -> None:
    """:func:`store` in its own session, for the service's schedule (``app.periodic``)."""
    with session_scope(sessions) as session:
        store(session=session)


def open_counts(*, session: Session) -> dict[str, int]:
    """Open, unacknowledged alerts by metric, for ``/metrics``."""
    found = open_alerts(session=session)
    return {metric: sum(a.metric == metric for a in found) for metric in METRICS}


@dataclass(frozen=True)
class _Found:
    key: tuple[int, datetime | None]
    alerts: list[Alert]  # without their acknowledgements
    at: datetime


_OPEN: dict[str, _Found] = {}  # by database: the last alerts found, or read from AlertSnapshot
_OPEN_LOCK = threading.Lock()  # scrapes, pages and the schedule run on several threads


def _key(session: Session) -> tuple[int, datetime | None]:
    """What the histories change with: the finished jobs' count and newest finish (a job finishes once)."""
    count, newest = session.execute(select(func.count(), func.max(Job.finished_at)).where(Job.finished_at.is_not(None))).one()
    return count, newest


def _kept(session: Session) -> _Found | None:
    """This process's last answer for the database; in a fresh process the stored one, kept from then on."""
    with _OPEN_LOCK:
        known = _OPEN.get(_database(session))
    if known is None:
        known = _stored(session)
        if known is not None:
            _keep(session, known)
    return known


def _stored(session: Session) -> _Found | None:
    """The newest ``AlertSnapshot``, if one was stored."""
    row = session.scalars(select(AlertSnapshot).order_by(AlertSnapshot.id.desc()).limit(1)).one_or_none()
    if row is None:
        return None
    alerts = [Alert(**(a | {"cell": AlertCell(**(a["cell"] | {"sweep_ids": tuple(a["cell"]["sweep_ids"])}))}))
              for a in row.alerts]
    return _Found((row.finished_jobs, row.newest_finish), alerts, row.computed_at)


def _keep(session: Session, known: _Found) -> None:
    with _OPEN_LOCK:
        _OPEN[_database(session)] = known


def _database(session: Session) -> str:
    # A migration's session is bound to a connection, a service's to its engine: both know the engine's URL.
    return str(session.get_bind().engine.url)


def _acknowledged(session: Session, alerts: list[Alert]) -> list[Alert]:
    """Each alert with its acknowledgement as stored now (one query; none when there is no alert)."""
    if not alerts:
        return []
    acks = {a.alert_id: a for a in session.scalars(select(AlertAck).where(AlertAck.alert_id.in_([a.id for a in alerts])))}
    return [replace(a, acknowledged=acks.get(a.id)) for a in alerts]


def acknowledge(*, session: Session, alert_id: str, reason: str, by: str) -> Alert:
    """Acknowledge an open alert with a reason. NotFoundError when no open alert has this id; ConflictError when
    it is acknowledged already."""
    alert = next((a for a in current(session=session) if a.id == alert_id), None)
    if alert is None:
        raise NotFoundError("open alert", alert_id)
    if alert.acknowledged is not None:
        raise ConflictError(f"alert {alert_id} was acknowledged by {alert.acknowledged.created_by}: {alert.acknowledged.reason}")
    ack = AlertAck(alert_id=alert_id, reason=reason, created_by=by)
    session.add(ack)
    session.flush()
    return replace(alert, acknowledged=ack)


def _value(metric: str, cell: PooledCell) -> float | None:
    if metric == "tokens_per_s":
        # A cell that produced nothing has no level to fit a ratio on.
        return cell.speed.median if cell.speed and cell.speed.median > 0 else None
    return cell.accepted / cell.draft_tokens if cell.draft_tokens else None
