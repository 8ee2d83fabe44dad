"""Claiming from several threads at once: the harness the queue's exclusivity tests share, and its lease."""

import threading
from collections.abc import Callable, Sequence

from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings

# The service's default lease: how long a worker lives without a heartbeat, for claims made outside the API.
LEASE = Settings.model_fields["lease_seconds"].default


def claim_concurrently(
    sessions: sessionmaker[Session], worker_ids: Sequence[int], claim: Callable[[Session, int], int | None]
) -> list[int]:
    """One thread per worker claims (each claim in its own transaction) until ``claim`` returns None.

    Returns every job id claimed, duplicates kept so the caller can count them. A thread's
    exception fails the caller: it is re-raised here rather than lost in the thread.
    """
    claimed: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def loop(worker_id: int) -> None:
        try:
            while True:
                with sessions.begin() as session:
                    job_id = claim(session, worker_id)
                if job_id is None:
                    return
                with lock:
                    claimed.append(job_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=loop, args=(w,)) for w in worker_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads), "a claiming thread hung"
    return claimed
