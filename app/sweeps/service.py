"""Creating, reading and cancelling sweeps."""

from pathlib import Path

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.config import Settings
from app.enums import JobState, SpecMethod, SweepState
from app.errors import InputError, NotFoundError
from app.jobs import queue
from app.models import Build, Crash, CrashSignature, Job, Result, Sweep, utcnow
from app.schemas.sweep import CellStatus, SweepDetail, SweepSpec, SweepSummary
from app.sweeps import engine_args, matrix, paths


def create(
    *,
    session: Session,
    spec: SweepSpec,
    settings: Settings,
    idempotency_key: str | None,
    created_by_token_id: int | None = None,
) -> tuple[Sweep, bool]:
    """Validate what the body's schema cannot, then store the sweep and one job per cell and repeat.

    Returns the sweep and whether it is new: a known idempotency key returns the first sweep.
    Everything happens in the caller's transaction: a rejected sweep leaves no rows behind.
    """
    if idempotency_key:
        existing = session.scalar(select(Sweep).where(Sweep.idempotency_key == idempotency_key))
        if existing is not None:
            return existing, False
    check_inputs(spec, settings=settings)
    _check_references(session=session, spec=spec)
    sweep = build(
        spec, max_cells=settings.max_cells, max_attempts=settings.max_attempts, idempotency_key=idempotency_key
    )
    sweep.created_by_token_id = created_by_token_id
    session.add(sweep)
    try:
        session.flush()
    except IntegrityError:
        # Two submissions with one idempotency key raced: the other one won, return it.
        session.rollback()
        existing = session.scalar(select(Sweep).where(Sweep.idempotency_key == idempotency_key))
        if existing is None:
            raise
        return existing, False
    return sweep, True


def build(spec: SweepSpec, *, max_cells: int, max_attempts: int, idempotency_key: str | None = None) -> Sweep:
    """The sweep and one job per cell and repeat, not yet added to a session."""
    # Counted before expanding, so a hostile matrix (thousands of drafts x every GPU) costs nothing.
    pairs = sum(matrix.runs_on(backend, gpu) for gpu in spec.gpus for backend in spec.attention_backends)
    count = pairs * len(spec.cudagraph_modes) * (len(spec.speculative) + spec.baseline)
    if not count:
        raise InputError(["gpus"], "no cell can run: CPU_ATTN runs only on gpu kind 'cpu' and 'cpu' only with CPU_ATTN")
    total = count * spec.repeats
    if total > max_cells:
        raise InputError(
            ["repeats"],
            f"the matrix has {total} jobs ({count} cells x {spec.repeats} repeats), over the limit of {max_cells}",
        )
    cells = matrix.expand(spec)
    sweep = Sweep(
        name=spec.name,
        spec=spec.model_dump(mode="json"),
        priority=spec.priority,
        pull_request=spec.pull_request,
        branch=spec.branch,
        commit=spec.commit,
        tags=spec.tags,
        submitted_by=spec.submitted_by,
        reason=spec.reason,
        idempotency_key=idempotency_key,
    )
    for cell in cells:
        config = matrix.canonical(cell.spec)
        digest = matrix.config_hash(cell.spec)
        try:
            gpus_needed = matrix.gpus_needed(cell.spec)
        except ValueError as exc:
            raise InputError(["engine_args"], str(exc)) from None
        sweep.jobs.extend(
            Job(
                cell_index=cell.index,
                repeat=repeat,
                build_label=spec.build,
                gpu_kind=cell.spec.gpu_kind.value,
                backend=cell.spec.attention_backend.value,
                graph_mode=cell.spec.cudagraph_mode.value,
                method=cell.method,
                config=config,
                config_hash=digest,
                priority=spec.priority,
                gpus_needed=gpus_needed,
                max_attempts=max_attempts,
            )
            for repeat in range(spec.repeats)
        )
    return sweep


def check_inputs(spec: SweepSpec, *, settings: Settings) -> None:
    """Refuse engine arguments off the allow-list and model or dataset paths outside the allowed roots.

    Raises InputError naming the first offending field; see ``engine_args`` and ``paths``.
    """
    refused = engine_args.problems(spec.engine_args)
    if refused:
        loc, msg, allowed = refused[0]
        raise InputError(["engine_args", *loc], msg, allowed=allowed)
    models = [(["model"], spec.model), (["tokenizer"], spec.tokenizer)]
    for index, draft in enumerate(spec.speculative):
        if draft.method is SpecMethod.CUSTOM_CLASS and draft.model is not None:
            reason = paths.import_path_problem(draft.model)
            if reason:
                raise InputError(["speculative", index, "model"], reason)
        else:
            models.append((["speculative", index, "model"], draft.model))
        models.extend(
            (["speculative", index, key], value)
            for key, value in (draft.model_extra or {}).items()
            if isinstance(value, str) and key.endswith(("model", "path", "dir"))
        )
    for loc, value in models:
        reason = value and paths.problem(value, roots=settings.allowed_model_roots, kind="model", hub_ok=True)
        if reason:
            raise InputError(loc, reason)
    reason = paths.problem(spec.workload.dataset, roots=settings.allowed_dataset_roots, kind="dataset", hub_ok=False)
    if reason:
        raise InputError(["workload", "dataset"], reason)


def _check_references(*, session: Session, spec: SweepSpec) -> None:
    labels = list(session.scalars(select(Build.label).order_by(Build.label)))
    if spec.build not in labels:
        raise InputError(
            ["build"],
            f"build {spec.build!r} is not registered by any worker",
            allowed=labels or ["(no build registered yet: start a worker)"],
        )
    if not Path(spec.workload.dataset).is_file():
        raise InputError(["workload", "dataset"], f"dataset {spec.workload.dataset!r} does not exist")


def get(*, session: Session, sweep_id: int) -> Sweep:
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise NotFoundError("sweep", sweep_id)
    return sweep


def list_recent(*, session: Session, limit: int, offset: int) -> list[Sweep]:
    return list(session.scalars(select(Sweep).order_by(Sweep.id.desc()).limit(limit).offset(offset)))


def cancel(*, session: Session, sweep_id: int) -> Sweep:
    sweep = get(session=session, sweep_id=sweep_id)
    queue.cancel(session=session, sweep_id=sweep_id)
    sweep.cancelled_at = sweep.cancelled_at or utcnow()
    return sweep


def state_of(sweep: Sweep, counts: dict[str, int]) -> SweepState:
    if sweep.cancelled_at is not None:
        return SweepState.CANCELLED
    if counts.get(JobState.RUNNING, 0):
        return SweepState.RUNNING
    if counts.get(JobState.QUEUED, 0):
        return SweepState.QUEUED if len(counts) == 1 else SweepState.RUNNING
    return SweepState.FINISHED


def summary(*, session: Session, sweep: Sweep) -> SweepSummary:
    return _summary(sweep, queue.counts_by_state(session=session, sweep_id=sweep.id))


def summaries(*, session: Session, limit: int, offset: int) -> list[SweepSummary]:
    """The newest sweeps with their job counts, in two queries whatever the page size."""
    recent = list_recent(session=session, limit=limit, offset=offset)
    counts = queue.counts_by_sweep(session=session, sweep_ids=[s.id for s in recent])
    return [_summary(s, counts[s.id]) for s in recent]


def _summary(sweep: Sweep, counts: dict[str, int]) -> SweepSummary:
    return SweepSummary(
        id=sweep.id,
        name=sweep.name,
        state=state_of(sweep, counts),
        created_at=sweep.created_at,
        build=sweep.spec["build"],
        pull_request=sweep.pull_request,
        branch=sweep.branch,
        commit=sweep.commit,
        tags=sweep.tags,
        counts=counts,
        total=sum(counts.values()),
    )


# A cell's status in one row: the job, what its result measured and ran, its crash's signature.
_CELL_COLUMNS = (
    Job.id.label("job_id"), Job.cell_index, Job.repeat, Job.gpu_kind, Job.backend, Job.graph_mode, Job.method,
    Job.state, Job.attempts, Result.acceptance_rate, Result.tokens_per_s, Result.resolved_backend,
    Result.resolved_graph_mode, Result.graph_downgraded, Result.draft_eager,
    CrashSignature.signature.label("crash_signature"),
)


def cells(*, session: Session, sweep_id: int) -> list[CellStatus]:
    """Every job of the sweep in job order, in one query (a sweep page is read far more than written)."""
    stmt = (
        select(*_CELL_COLUMNS)
        .outerjoin(Result, Result.job_id == Job.id)
        .outerjoin(Crash, Crash.job_id == Job.id)
        .outerjoin(CrashSignature, CrashSignature.id == Crash.signature_id)
        .where(Job.sweep_id == sweep_id)
        .order_by(Job.id)
    )
    # Without a result the outer join gives NULL flags: nothing ran, so nothing was downgraded.
    return [
        CellStatus(**{**row._mapping, "graph_downgraded": bool(row.graph_downgraded), "draft_eager": bool(row.draft_eager)})
        for row in session.execute(stmt)
    ]


def detail(*, session: Session, sweep: Sweep) -> SweepDetail:
    base = summary(session=session, sweep=sweep)
    return SweepDetail(**base.model_dump(), spec=sweep.spec, cells=cells(session=session, sweep_id=sweep.id))
