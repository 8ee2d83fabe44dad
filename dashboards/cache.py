"""What a finished sweep's page shows, kept per service process (``app.lru.LRU``): such a sweep never changes again."""

from app.enums import JobState

# Sweeps whose matrices a process keeps.
FINISHED_SWEEPS = 512


def is_over(counts: dict[str, int]) -> bool:
    """No job queued or running: every job is final, and final jobs and their results never change.

    (Cancelling an over sweep changes no job; the page's state badge is read fresh every time.)
    """
    return not (counts.get(JobState.QUEUED, 0) or counts.get(JobState.RUNNING, 0))
