"""Storing what a cell reported, and reading results back with filters."""

from dataclasses import dataclass

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.analysis.acceptance import derive
from app.crashes import service as crashes
from app.enums import JobState
from app.jobs import queue
from app.models import Job, Result, Sweep
from app.results import compare
from app.schemas.cell import CellOutcome, CellResult, Ran
from app.schemas.result import ResultOut


def complete(*, session: Session, job_id: int, worker_id: int, outcome: CellOutcome) -> Job:
    """Store a finished cell: a result, or a crash under its signature. Raises NotLeasedError.

    The job must still be held by the worker: a late report after the lease moved on is refused so
    the newer attempt's result stands.
    """
    job = queue.hold(session=session, job_id=job_id, worker_id=worker_id)
    record(session=session, job=job, outcome=outcome)
    return job


def record(*, session: Session, job: Job, outcome: CellOutcome) -> None:
    """Store an outcome on its job and move the job to the matching final state."""
    if outcome.result is not None:
        session.add(_result_row(job, outcome.result, outcome.ran))
        queue.finish(session=session, job=job, state=JobState.SUCCEEDED)
    elif outcome.error is not None:
        queue.finish(session=session, job=job, state=JobState.FAILED, error=outcome.error)
    else:
        log = crashes.read_log(session=session, job_id=job.id) or ""
        crash = crashes.record(session=session, job=job, outcome=outcome, log=log)
        state = JobState.TIMED_OUT if outcome.timed_out else JobState.CRASHED
        queue.finish(session=session, job=job, state=state, error=crash.message)


def _result_row(job: Job, result: CellResult, ran: Ran) -> Result:
    metrics = derive(result.spec, result.requests)
    spec = result.spec
    return Result(
        job=job,
        engine_start_s=result.engine_start_s,
        generation_s=result.generation_s,
        num_requests=result.num_requests,
        output_tokens=result.output_tokens,
        tokens_per_s=result.tokens_per_s,
        requests_per_s=result.requests_per_s,
        num_drafts=spec.num_drafts if spec else 0,
        num_draft_tokens=spec.num_draft_tokens if spec else 0,
        num_accepted_tokens=spec.num_accepted_tokens if spec else 0,
        accepted_per_position=spec.accepted_per_position if spec else [],
        acceptance_rate=metrics.acceptance_rate,
        acceptance_rate_low=metrics.acceptance_rate_low,
        acceptance_rate_high=metrics.acceptance_rate_high,
        mean_acceptance_length=metrics.mean_acceptance_length,
        mean_acceptance_length_low=metrics.mean_acceptance_length_low,
        mean_acceptance_length_high=metrics.mean_acceptance_length_high,
        output_fingerprint=result.output_fingerprint,
        resolved_backend=ran.backend,
        resolved_draft_backend=ran.draft_backend,
        resolved_graph_mode=ran.graph_mode,
        resolved_draft_graph_mode=ran.draft_graph_mode,
        graph_downgraded=ran.graph_downgraded,
        draft_eager=ran.draft_eager,
        vllm_version=result.versions.vllm,
        gpu_name=result.versions.gpu_name,
        versions=result.versions.model_dump(mode="json"),
        raw=result.model_dump(mode="json"),
        ran=ran.model_dump(mode="json"),
    )


@dataclass(frozen=True)
class ResultFilter:
    sweep_id: int | None = None
    build: str | None = None
    backend: str | None = None
    graph_mode: str | None = None
    method: str | None = None
    gpu_kind: str | None = None

    def apply(self, stmt: Select) -> Select:
        for column, value in (
            (Job.sweep_id, self.sweep_id),
            (Job.build_label, self.build),
            (Job.backend, self.backend),
            (Job.graph_mode, self.graph_mode),
            (Job.method, self.method),
            (Job.gpu_kind, self.gpu_kind),
        ):
            if value is not None:
                stmt = stmt.where(column == value)
        return stmt


def query(*, session: Session, where: ResultFilter, limit: int, offset: int) -> list[tuple[Result, Job, Sweep]]:
    stmt = where.apply(select(Result, Job, Sweep).join(Result.job).join(Job.sweep))
    return [tuple(row) for row in session.execute(stmt.order_by(Result.id).limit(limit).offset(offset)).all()]


def query_out(*, session: Session, where: ResultFilter, limit: int, offset: int) -> list[ResultOut]:
    """Results as the API shows them, each speculative cell compared with its sweep's baseline."""
    rows = query(session=session, where=where, limit=limit, offset=offset)
    sweep_ids = {job.sweep_id for _, job, _ in rows if job.method is not None}
    baselines = {}
    if sweep_ids:
        stmt = select(Result, Job).join(Result.job).where(Job.sweep_id.in_(sweep_ids), Job.method.is_(None))
        baselines = {compare.baseline_key(job): result for result, job in session.execute(stmt)}
    return compare.to_out(rows, baselines)
