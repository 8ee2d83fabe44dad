"""The service's own schedule for finding stalled jobs: every ``stall_check_seconds``, whether or not anyone claims.

Before this ran on a schedule it ran only inside a claim, so when every worker was gone their jobs
stayed ``running`` forever. Each service process runs the check; the statements are idempotent and
skip rows another process has locked, so N processes (or N replicas) are as safe as one.
"""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.to_thread
from sqlalchemy.exc import SQLAlchemyError
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


@asynccontextmanager
async def checking(sessions: sessionmaker[Session], *, lease_seconds: float, every_s: float) -> AsyncIterator[None]:
    """Run ``check_once`` every ``every_s`` seconds (in a thread: it blocks on the database) while the block runs."""

    async def loop() -> None:
        while True:
            await anyio.sleep(every_s)
            try:
                await anyio.to_thread.run_sync(lambda: check_once(sessions, lease_seconds=lease_seconds))
            except SQLAlchemyError:
                # The database being away is the metrics' and the operator's business; try again next period.
                log.exception("stalled-job check failed")

    async with anyio.create_task_group() as group:
        group.start_soon(loop)
        try:
            yield
        finally:
            group.cancel_scope.cancel()
