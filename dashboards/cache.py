"""What a finished sweep's page shows, kept per service process (``app.lru.LRU``): such a sweep never changes again;
and the figures a page's HTML named, for the images a browser asks for right after it."""

from app.enums import JobState

# Sweeps whose matrices a process keeps.
FINISHED_SWEEPS = 512
# Pages (URLs) whose drawings a process keeps once their HTML is rendered, and for how long: a browser asks for each
# image of a page right after the page, and each would read the page's data again (/fallback's 18 images, 18 reads).
# Past that, a figure's URL reads what is stored then.
SHOWN_PAGES = 256
SHOWN_FOR_S = 120.0


def is_over(counts: dict[str, int]) -> bool:
    """No job queued or running: every job is final, and final jobs and their results never change.

    (Cancelling an over sweep changes no job; the page's state badge is read fresh every time.)
    """
    return not (counts.get(JobState.QUEUED, 0) or counts.get(JobState.RUNNING, 0))
