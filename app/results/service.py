"""Storing what a cell reported, and reading results back with filters."""

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.alarms import service as alarms
from app.analysis import request_acceptance
from app.analysis.acceptance import calibration_misses, derive
from app.analysis.energy import tokens_per_joule
from app.analysis.passes import start_interval
from app.analysis.rounds import MedianInterval, efficiency, median_interval
from app.cells.scope import CellScope
from app.crashes import service as crashes
from app.enums import JobState, ResultSource
from app.jobs import queue
from app.models import Job, Result, Sweep, utcnow
from app.noise import service as noise
from app.results import baselines
from app.schemas.cell import CellResult, JobOutcome, Resolved
from app.schemas.result import ResultOut
from app.vllmlog.ran import parse_log


def record(
    *, session: Session, job: Job, outcome: JobOutcome, finished_at: datetime | None = None, refresh_alarms: bool = True
) -> None:
    """Store an outcome on its (held) job and move the job to the matching final state.

    A result judges its build and GPU kind's graph-capture alarm again (``app.alarms.service.refresh``), in the
    same transaction; an import, which stores many, passes ``refresh_alarms=False`` and refreshes once.

    What ran is read here from the job's stored log, with the rules of ``app.vllmlog.ran``, so that
    ``draftbench rederive`` can read it again when the rules change; the worker's reading stands only
    for a job without a stored log. ``finished_at`` is when the cell ended (an import knows it); by
    default now.
    """
    now = finished_at or utcnow()
    log = crashes.read_log(session=session, job_id=job.id)
    if outcome.result is not None:
        resolved = outcome.resolved
        if log is not None:
            resolved = parse_log(log, backend=job.backend, graph_mode=job.graph_mode, method=job.method)
        session.add(result_row(job, outcome.result, resolved, created_at=now))
        queue.finish(session=session, job=job, state=JobState.SUCCEEDED, now=now)
        if refresh_alarms:
            alarms.refresh(session=session, build=job.build, gpu_kind=job.gpu_kind)
    elif outcome.error is not None:
        queue.finish(session=session, job=job, state=JobState.FAILED, error=outcome.error, now=now)
    else:
        crash = crashes.record(session=session, job=job, outcome=outcome, log=log or "", now=now)
        state = JobState.TIMED_OUT if outcome.timed_out else JobState.CRASHED
        queue.finish(session=session, job=job, state=state, error=crash.message, now=now)


def result_row(job: Job, result: CellResult, resolved: Resolved, *, created_at: datetime) -> Result:
    """The row that stores ``result`` of ``job``: its throughput and interval (``start_throughput``), its
    acceptance derived (``app.analysis.acceptance.derive``)."""
    rounds = [r.spec_decode for r in result.rounds if r.spec_decode is not None]
    metrics = derive(result.spec_decode, result.requests, rounds)
    counters = result.spec_decode
    throughput, passes = start_throughput(result)
    expected = expected_per_position(job.spec.get("speculative"))
    raw = result.model_dump(mode="json")
    # From the rounds as stored, as migration 0021 reads them for rows stored before.
    round_speeds, round_squares = noise.round_terms(raw.get("rounds"))
    by_request = request_acceptance.summarise(result.requests)
    per_joule = tokens_per_joule([(r.output_tokens, r.energy_j) for r in result.rounds])
    energy = result.energy
    return Result(
        source=ResultSource.CELL.value,  # the column's default, set here too: a row pooled before its flush reads it
        job=job,
        engine_start_s=result.engine_start_s,
        generation_s=result.generation_s,
        num_requests=result.num_requests,
        output_tokens=result.output_tokens,
        tokens_per_s=throughput.median,
        tokens_per_s_low=throughput.low,
        tokens_per_s_high=throughput.high,
        tokens_per_s_level=throughput.confidence,
        passes=passes,
        requests_per_s=result.requests_per_s,
        rounds=throughput.n,
        round_speeds=round_speeds,
        round_squares=round_squares,
        energy_j=energy.joules if energy else None,
        tokens_per_joule=per_joule.median if per_joule else None,
        tokens_per_joule_low=per_joule.low if per_joule else None,
        tokens_per_joule_high=per_joule.high if per_joule else None,
        energy_reason=energy_reason(result, per_joule is not None),
        measured_s=sum(r.seconds for r in result.rounds) or result.generation_s,
        efficiency=efficiency(sum(r.seconds for r in result.rounds) or result.generation_s, result.wall_s or 0.0),
        model_runner=result.model_runner,
        serving=result.serving.model_dump(mode="json") if result.serving else None,
        empty_as_failed=result.serving is not None and result.serving.empty is None,
        expected_per_position=expected,
        calibration_miss=any(calibration_misses(expected, metrics.per_position)) if expected and counters else None,
        num_drafts=counters.num_drafts if counters else 0,
        num_draft_tokens=counters.num_draft_tokens if counters else 0,
        num_accepted_tokens=counters.num_accepted_tokens if counters else 0,
        accepted_per_position=counters.accepted_per_position if counters else [],
        request_acceptance=by_request.to_json() if by_request else None,
        acceptance_rate=metrics.acceptance_rate,
        acceptance_rate_low=metrics.acceptance_rate_low,
        acceptance_rate_high=metrics.acceptance_rate_high,
        mean_acceptance_length=metrics.mean_acceptance_length,
        mean_acceptance_length_low=metrics.mean_acceptance_length_low,
        mean_acceptance_length_high=metrics.mean_acceptance_length_high,
        output_fingerprint=result.output_fingerprint,
        resolved_backend=resolved.resolved_backend,
        resolved_draft_backend=resolved.resolved_draft_backend,
        resolved_graph_mode=resolved.resolved_graph_mode,
        resolved_draft_graph_mode=resolved.resolved_draft_graph_mode,
        graph_downgraded=resolved.graph_downgraded,
        draft_eager=resolved.draft_eager,
        async_scheduling_off=resolved.async_scheduling_off,
        vllm_version=result.versions.vllm,
        gpu_name=result.versions.gpu_name,
        versions=result.versions.model_dump(mode="json"),
        raw=raw,
        ran=resolved.model_dump(mode="json"),
        created_at=created_at,
    )


def start_throughput(result: CellResult) -> tuple[MedianInterval, int | None]:
    """One engine start's tokens/s with its interval and the passes it resampled (``app.analysis.passes.start_interval``:
    over the passes where the cell kept them, else the rounds' order statistics). A result without rounds (cell
    schema 1 and 2: one generation window) is one round. The row stores it; the API and the pages read it there."""
    if not result.rounds:
        return median_interval([result.tokens_per_s]), None
    return start_interval([(r.seconds, r.output_tokens, [(p.seconds, p.output_tokens) for p in r.passes])
                           for r in result.rounds])


def energy_reason(result: CellResult, measured: bool) -> str | None:
    """Why a result has no tokens/J: the cell's own reason, else what the rounds lack; None when it has one, and for a
    cell of a schema before energy (as migration 0023 leaves the rows stored before it), which the pages read as
    "not reported"."""
    if measured or result.energy is None:
        return None
    return result.energy.reason or "not reported (a round's energy counter did not move)"


def expected_per_position(speculative: dict | None) -> list[float] | None:
    """The per-position rates a calibration cell asked vLLM for (synthetic rejection sampling), else None."""
    if not speculative or speculative.get("rejection_sample_method") != "synthetic":
        return None
    rates = speculative.get("synthetic_acceptance_rates")
    return [float(rate) for rate in rates] if isinstance(rates, list) else None


@dataclass(frozen=True)
class ResultFilter:
    """What the cell requested (``requested``: the scope pages read cells by) and what ran (the resolved backend
    and graph mode, and whether vLLM downgraded) are separate filters."""

    requested: CellScope = field(default_factory=CellScope)
    resolved_backend: str | None = None
    resolved_graph_mode: str | None = None
    graph_downgraded: bool | None = None
    draft_eager: bool | None = None

    def apply(self, stmt: Select) -> Select:
        stmt = self.requested.apply(stmt)
        for column, value in (
            (Result.resolved_backend, self.resolved_backend),
            (Result.resolved_graph_mode, self.resolved_graph_mode),
            (Result.graph_downgraded, self.graph_downgraded),
            (Result.draft_eager, self.draft_eager),
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
    out = baselines.to_out(rows, baselines.baselines(session=session, jobs=[job for _, job, _ in rows]))
    return _with_alarms(session, out)


def _with_alarms(session: Session, out: list[ResultOut]) -> list[ResultOut]:
    """Each result's cell alarm, as stored for its build (``app.alarms.service``)."""
    builds = tuple(sorted({r.build for r in out if r.method is not None}))
    if not builds:
        return out
    kinds: dict[int, set] = {}
    for alarm in alarms.read(session=session, scope=CellScope(builds=builds), checks=False).alarms:
        for job_id in alarm.cell.job_ids:
            kinds.setdefault(job_id, set()).add(alarm.kind)
    for row in out:
        if row.job_id in kinds:
            row.alarm = sorted(kinds[row.job_id])
    return out
