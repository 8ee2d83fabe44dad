"""Finding stalled jobs, every ``stall_check_seconds`` on the service's schedule (``app.periodic``), whether or not
anyone claims.

Before this ran on a schedule it ran only inside a claim, so when every worker was gone their jobs
stayed ``running`` forever. Each service process runs the check; the statements are idempotent and
skip rows another process has locked, so N processes (or N replicas) are as safe as one.
"""

import logging

from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.jobs import queue

log = logging.getLogger("draftbench.stalled")


def check_once(sessions: sessionmaker[Session], *, lease_seconds: float) -> int:
    """One pass in its own transaction; returns how many jobs it requeued or failed."""
    with session_scope(sessions) as session:
        changed = queue.requeue_stalled(session=session, lease_seconds=lease_seconds)
    if changed:
        log.info("requeued or failed %d job(s) of workers not heard from for %g s", changed, lease_seconds)
    return changed
