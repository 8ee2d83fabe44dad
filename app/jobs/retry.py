"""What happens to a job whose worker died: the retry policy, kept apart from detecting the death."""

from dataclasses import dataclass

from app.enums import JobState


@dataclass(frozen=True)
class Decision:
    state: JobState
    error: str | None


def after_stall(*, attempts: int, max_attempts: int, worker_id: int | None) -> Decision:
    """A stalled job goes back to the queue until it has used ``max_attempts``; then it fails.

    Each claim counted an attempt, so a cell that kills its worker every time (a host OOM, a kernel
    panic) stops after ``max_attempts`` instead of taking the fleet down one worker at a time.
    """
    if attempts >= max_attempts:
        holder = "its worker" if worker_id is None else f"worker {worker_id}"
        return Decision(JobState.FAILED, f"{holder} died on attempt {attempts} of {max_attempts}")
    return Decision(JobState.QUEUED, None)
