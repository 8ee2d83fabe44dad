"""The one rule for whether a worker is alive, in Python and in SQL.

A worker is alive while its last heartbeat (or claim) is younger than the lease: ``now -
last_heartbeat_at < lease_seconds``. Everything that asks reads this module: the workers list, the
metrics, the stalled-job check (app.jobs.stalled), the check that a report comes from a worker that
still holds its job (app.jobs.queue.hold), and the warning that a sweep has no worker to serve it.
As in procrastinate, a job is never judged by its own age: a long cell whose worker keeps beating is
running, however long it takes (its own ``timeout_s`` ends it on the worker).
"""

from datetime import datetime, timedelta

from sqlalchemy import ColumnElement

from app.models import Worker


def cutoff(*, now: datetime, lease_seconds: float) -> datetime:
    """Heartbeats at or before this instant are too old: their worker is dead."""
    return now - timedelta(seconds=lease_seconds)


def is_alive(last_heartbeat_at: datetime, *, now: datetime, lease_seconds: float) -> bool:
    return last_heartbeat_at > cutoff(now=now, lease_seconds=lease_seconds)


def alive(*, now: datetime, lease_seconds: float) -> ColumnElement[bool]:
    """The same rule as a SQL condition on ``workers``."""
    return Worker.last_heartbeat_at > cutoff(now=now, lease_seconds=lease_seconds)
