"""Reading jobs (the queue's own statements live in app.jobs.queue)."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.enums import JobState
from app.models import Job


def list_jobs(*, session: Session, sweep_id: int | None, state: JobState | None, limit: int, offset: int) -> list[Job]:
    stmt = select(Job).order_by(Job.id).limit(limit).offset(offset)
    if sweep_id is not None:
        stmt = stmt.where(Job.sweep_id == sweep_id)
    if state is not None:
        stmt = stmt.where(Job.state == state)
    return list(session.scalars(stmt))
