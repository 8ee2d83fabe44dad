"""The service's own schedule: work each service process does every few seconds, whether or not anyone asks.

Each job runs in a thread (it blocks on the database), one after the other, every ``every_s`` seconds while
the block runs; an error is logged and the job tried again next period (an exception escaping the loop
would end the service's lifespan).
"""

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.to_thread
from sqlalchemy.exc import SQLAlchemyError

log = logging.getLogger("draftbench.periodic")


@asynccontextmanager
async def running(every_s: float, *jobs: tuple[str, Callable[[], object]]) -> AsyncIterator[None]:
    """Run each ``(name, job)`` every ``every_s`` seconds while the block runs."""

    async def loop() -> None:
        while True:
            await anyio.sleep(every_s)
            for name, job in jobs:
                await once(name, job)

    async with anyio.create_task_group() as group:
        group.start_soon(loop)
        try:
            yield
        finally:
            group.cancel_scope.cancel()


async def once(name: str, job: Callable[[], object]) -> None:
    """Run ``job`` once in a thread; an error is logged, never raised (the next period, if any, tries again)."""
    try:
        await anyio.to_thread.run_sync(job)
    except SQLAlchemyError:
        # The database being away is the metrics' and the operator's business; try again next period.
        log.exception("%s failed", name)
    except Exception:
        log.exception("%s failed (not the database): the next period tries again", name)
