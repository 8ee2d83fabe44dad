"""Creating, reading and cancelling sweeps."""

import hashlib
import json
import math
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, defer

from app import newest
from app.config import Settings
from app.enums import BuiltinDataset, JobState, SpecMethod, SweepState
from app.errors import ConflictError, InputError, NotFoundError
from app.jobs import queue
from app.models import Crash, CrashSignature, Job, Result, Sweep, utcnow
from app.schemas.sweep import NOT_MATRIX, JobStatus, MoreRequest, SweepDetail, SweepSpec, SweepSummary, matrix_of
from app.sweeps import engine_args, matrix, pairing, paths
from app.workers import service as workers

# The idempotency scope of sweeps made by ``app.sweeps.imports`` (API senders' scopes: ``Principal.key``).
IMPORT_SCOPE = "import"


@dataclass(frozen=True)
class Idempotency:
    """An Idempotency-Key and who sent it (``Principal.key``): a key means nothing outside its sender."""

    scope: str
    key: str


def create(
    *,
    session: Session,
    spec: SweepSpec,
    settings: Settings,
    idempotency: Idempotency | None,
    created_by_token_id: int | None = None,
) -> tuple[Sweep, bool]:
    """Validate what the body's schema cannot, then store the sweep and one job per cell and repeat.

    Returns the sweep and whether it is new: the sender's known key with the same body returns the
    first sweep; with another body it raises ConflictError (409). Everything happens in the
    caller's transaction: a rejected sweep leaves no rows behind. A sweep ``paired_with`` another has its
    jobs paired with that one's (app.sweeps.pairing).
    """
    digest = request_hash(spec)
    if idempotency is not None:
        existing = by_key(session=session, idempotency=idempotency)
        if existing is not None:
            return _same_request(existing, digest, idempotency), False
    check_inputs(spec, settings=settings)
    _check_references(session=session, spec=spec)
    base = _pairable(session=session, spec=spec)
    sweep = build(spec, max_jobs=settings.max_jobs, max_attempts=settings.max_attempts)
    _each_draft_once(spec)  # after build, whose job count bounds the configs it walks
    sweep.created_by_token_id = created_by_token_id
    sweep.request_hash = digest
    if idempotency is not None:
        sweep.idempotency_scope, sweep.idempotency_key = idempotency.scope, idempotency.key
    session.add(sweep)
    try:
        session.flush()
    except IntegrityError:
        # Two submissions with one key from one sender raced: the other one won, answer with it.
        session.rollback()
        existing = by_key(session=session, idempotency=idempotency) if idempotency else None
        if existing is None:
            raise
        return _same_request(existing, digest, idempotency), False
    if base is not None:
        pairing.pair(session=session, base=base, head=sweep)
    return sweep, True


def request_hash(spec: SweepSpec) -> str:
    """sha256 of the validated sweep as canonical JSON: equal for equal sweeps, however they were written."""
    canonical = json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def by_key(*, session: Session, idempotency: Idempotency) -> Sweep | None:
    return session.scalar(
        select(Sweep).where(Sweep.idempotency_scope == idempotency.scope, Sweep.idempotency_key == idempotency.key)
    )


def _same_request(existing: Sweep, digest: str, idempotency: Idempotency) -> Sweep:
    if existing.request_hash not in (None, digest):
        raise ConflictError(
            f"Idempotency-Key {idempotency.key!r} was first sent with another sweep (sweep {existing.id}); "
            "use a new key for a new sweep"
        )
    return existing


def job_count(spec: SweepSpec, *, max_jobs: int) -> int:
    """How many jobs the sweep makes, counted without expanding it (a hostile matrix of thousands of drafts
    x every GPU costs nothing); InputError when no cell can run or there are more than ``max_jobs``."""
    pairs = sum(matrix.runs_on(backend, gpu) for gpu in spec.gpu_kinds for backend in spec.backends)
    axes = math.prod(len(values) for values in [*spec.env.values(), *engine_args.axes(spec.engine_args).values()])
    axes *= len(matrix.concurrencies(spec))
    count = pairs * len(spec.graph_modes) * matrix.speculative_count(spec) * axes
    if not count:
        raise InputError(
            ["gpu_kinds"], "no cell can run: CPU_ATTN runs only on GPU kind 'cpu' and 'cpu' only with CPU_ATTN"
        )
    total = count * spec.repeats
    if total > max_jobs:
        raise InputError(
            ["repeats"],
            f"the matrix has {total} jobs ({count} cells x {spec.repeats} repeats), over the limit of {max_jobs}",
        )
    return total


def build(spec: SweepSpec, *, max_jobs: int, max_attempts: int) -> Sweep:
    """The sweep and one job per cell and repeat, not yet added to a session."""
    job_count(spec, max_jobs=max_jobs)
    cells = matrix.expand(spec)
    sweep = Sweep(
        name=spec.name,
        build=spec.build,
        spec=spec.model_dump(mode="json"),
        priority=spec.priority,
        pull_request=spec.pull_request,
        branch=spec.branch,
        commit=spec.commit,
        tags=spec.tags,
        submitted_by=spec.submitted_by,
        reason=spec.reason,
    )
    for cell in cells:
        digest = matrix.config_hash(cell.spec)
        try:
            gpus_needed = matrix.gpus_needed(cell.spec)
        except ValueError as exc:
            raise InputError(["engine_args"], str(exc)) from None
        sweep.jobs.extend(
            Job(
                cell_index=cell.index,
                repeat=repeat,
                build=spec.build,
                gpu_kind=cell.spec.gpu_kind.value,
                backend=cell.spec.backend.value,
                graph_mode=cell.spec.graph_mode.value,
                method=cell.method,
                mode=cell.spec.mode.value,
                concurrency=cell.spec.concurrency,
                env=cell.spec.env,
                spec=matrix.canonical(cell.spec),
                config_hash=digest,
                priority=spec.priority,
                gpus_needed=gpus_needed,
                max_attempts=max_attempts,
            )
            for repeat in range(spec.repeats)
        )
    return sweep


def check_inputs(spec: SweepSpec, *, settings: Settings) -> None:
    """Refuse what may not reach vLLM (engine arguments and speculative keys off their lists) and
    model or dataset paths outside the allowed roots.

    Raises InputError naming the first offending field; see ``engine_args`` and ``paths``.
    """
    refused = engine_args.problems(spec.engine_args)
    if refused:
        loc, msg, allowed = refused[0]
        raise InputError(["engine_args", *loc], msg, allowed=allowed)
    refused = engine_args.env_problems(spec.env)
    if refused:
        loc, msg, allowed = refused[0]
        raise InputError(["env", *loc], msg, allowed=allowed)
    models: list[tuple[list[str | int], str | None]] = [(["model"], spec.model), (["tokenizer"], spec.tokenizer)]
    models += [(["engine_args", *loc], value) for loc, value in engine_args.references(spec.engine_args)]
    for index, draft in enumerate(spec.speculative):
        # Its configs differ only in k, which the schema checked: the first stands for them all.
        refused = engine_args.speculative_problems(matrix.each_k(draft, mode="json")[0])
        if refused:
            loc, msg, allowed = refused[0]
            raise InputError(["speculative", index, *loc], msg, allowed=allowed)
        if draft.method is SpecMethod.CUSTOM_CLASS and draft.model is not None:
            reason = paths.import_path_problem(draft.model)
            if reason:
                raise InputError(["speculative", index, "model"], reason)
        else:
            models.append((["speculative", index, "model"], draft.model))
    for loc, value in models:
        reason = value and paths.problem(value, roots=settings.allowed_model_roots, kind="model", hub_ok=True)
        if reason:
            raise InputError(loc, reason)
    if not is_builtin(spec.workload.dataset):
        reason = paths.problem(spec.workload.dataset, roots=settings.allowed_dataset_roots, kind="dataset", hub_ok=False)
        if reason:
            raise InputError(["workload", "dataset"], reason)


def _each_draft_once(spec: SweepSpec) -> None:
    """InputError naming the speculative config that repeats a cell of an earlier one (``matrix.repeated_draft``)."""
    repeated = matrix.repeated_draft(spec)
    if repeated:
        index, earlier, k = repeated
        raise InputError(["speculative", index], f"speculative[{index}] makes the cell of speculative[{earlier}] with "
                                                 f"num_speculative_tokens {k} again: list each config and k once")


def runs_code(spec: SweepSpec) -> bool:
    """Whether the sweep asks vLLM to import a class it names (``custom_class``): code execution."""
    return any(draft.method is SpecMethod.CUSTOM_CLASS for draft in spec.speculative)


def is_builtin(dataset: str) -> bool:
    return dataset in {d.value for d in BuiltinDataset}


def _check_references(*, session: Session, spec: SweepSpec) -> None:
    labels = workers.build_labels(session=session)
    if spec.build not in labels:
        raise InputError(
            ["build"],
            f"build {spec.build!r} is unknown: no worker has registered it and no imported sweep ran on it",
            allowed=labels or ["(no build registered yet: start a worker)"],
        )
    dataset = spec.workload.dataset
    if is_builtin(dataset):
        return
    if "/" not in dataset:
        raise InputError(
            ["workload", "dataset"],
            f"dataset {dataset!r} is neither a built-in dataset nor a path",
            allowed=[*(d.value for d in BuiltinDataset), "/path/to/questions.jsonl", "/path/to/sharegpt.json"],
        )
    if reason := paths.unreadable(dataset, kind="dataset"):
        raise InputError(["workload", "dataset"], reason)


def _pairable(*, session: Session, spec: SweepSpec) -> Sweep | None:
    """The sweep ``spec.paired_with`` names, locked against a second pairing: InputError on ``paired_with`` unless
    it exists, has jobs still queued, is paired with no other sweep and runs the same matrix (its build and
    ``NOT_MATRIX`` fields aside). None when the spec names none."""
    if spec.paired_with is None:
        return None
    where = ["paired_with"]
    base = session.execute(
        select(Sweep).where(Sweep.id == spec.paired_with).with_for_update().execution_options(populate_existing=True)
    ).scalar_one_or_none()
    if base is None:
        raise InputError(where, f"sweep {spec.paired_with} does not exist")
    counts = queue.counts_by_state(session=session, sweep_id=base.id)
    state = state_of(base, counts)
    if state in (SweepState.FINISHED, SweepState.CANCELLED) or not counts.get(JobState.QUEUED):
        raise InputError(where, f"sweep {base.id} is {state} with no job queued: a sweep pairs only with one whose "
                                "jobs are still queued (a finished base is compared unpaired)")
    other = pairing.partner(session=session, sweep_id=base.id)
    if other is not None:
        raise InputError(where, f"sweep {base.id} is already paired with sweep {other}: a sweep pairs with one other")
    theirs, ours = matrix_of(base.spec), matrix_of(spec.model_dump(mode="json"))
    differ = sorted(key for key in theirs.keys() | ours.keys() if theirs.get(key) != ours.get(key))
    if differ:
        raise InputError(where, f"sweep {base.id} runs another matrix: {', '.join(differ)} differ (paired sweeps may "
                                f"differ only in {', '.join(sorted(NOT_MATRIX - {'paired_with'}))})")
    return base


def more(*, session: Session, sweep: Sweep, request: MoreRequest, settings: Settings) -> Sweep:
    """``request``'s more pairs of starts of some cells of ``sweep``, one job of each pair in ``sweep`` and one in
    its partner; both go back to running. Returns the partner.

    ConflictError (409) when ``sweep`` is paired with no other or either is cancelled; InputError naming the
    field for a cell the sweep lacks, a cell listed twice, or more jobs than ``DRAFTBENCH_MAX_JOBS``. Both sweeps'
    rows are locked first, so two requests at once number their repeats one after the other.
    """
    other_id = pairing.partner(session=session, sweep_id=sweep.id)
    if other_id is None:
        raise ConflictError(f"sweep {sweep.id} is not paired with another sweep: starts are added in pairs, to a "
                            "sweep submitted with paired_with and to its base")
    session.execute(select(Sweep.id).where(Sweep.id.in_([sweep.id, other_id])).order_by(Sweep.id).with_for_update()).all()
    other = get(session=session, sweep_id=other_id)
    for each in (sweep, other):
        if each.cancelled_at is not None:
            raise ConflictError(f"sweep {each.id} is cancelled: no more starts are added to it")
    count = pairing.cell_count(session=session, sweep_id=sweep.id)
    cells: dict[int, int] = {}
    for index, cell in enumerate(request.cells):
        where = ["cells", index, "cell_index"]
        if cell.cell_index >= count:
            raise InputError(where, f"sweep {sweep.id} has cells 0 to {count - 1}, not cell {cell.cell_index}")
        if cell.cell_index in cells:
            raise InputError(where, f"cell {cell.cell_index} is listed twice")
        cells[cell.cell_index] = cell.pairs
    adding = sum(cells.values())
    for each in (sweep, other):
        total = sum(queue.counts_by_state(session=session, sweep_id=each.id).values()) + adding
        if total > settings.max_jobs:
            raise InputError(["cells"], f"sweep {each.id} would have {total} jobs, over the limit of {settings.max_jobs} "
                                        "(DRAFTBENCH_MAX_JOBS)")
    base, head = (other, sweep) if sweep.spec.get("paired_with") == other.id else (sweep, other)
    pairing.add(session=session, base=base, head=head, cells=cells, max_attempts=settings.max_attempts)
    return other


def get(*, session: Session, sweep_id: int) -> Sweep:
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise NotFoundError("sweep", sweep_id)
    return sweep


def list_recent(*, session: Session, limit: int, offset: int) -> list[Sweep]:
    """The newest sweeps (``app.newest.SWEEPS``), without their specs (a list never needs them, and a spec can be
    large)."""
    stmt = select(Sweep).options(defer(Sweep.spec)).order_by(*newest.SWEEPS).limit(limit).offset(offset)
    return list(session.scalars(stmt))


def cancel(*, session: Session, sweep_id: int) -> Sweep:
    sweep = get(session=session, sweep_id=sweep_id)
    queue.cancel(session=session, sweep_id=sweep_id)
    sweep.cancelled_at = sweep.cancelled_at or utcnow()
    return sweep


def state_of(sweep: Sweep, counts: dict[str, int]) -> SweepState:
    """Cancelled, else running while a job runs; a sweep with jobs still queued is queued or running, except
    an imported one: what ran elsewhere came in whole, and the cells it never ran stay queued to be seen."""
    if sweep.cancelled_at is not None:
        return SweepState.CANCELLED
    if counts.get(JobState.RUNNING, 0):
        return SweepState.RUNNING
    if sweep.idempotency_scope == IMPORT_SCOPE:
        return SweepState.FINISHED
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
        build=sweep.build,
        pull_request=sweep.pull_request,
        branch=sweep.branch,
        commit=sweep.commit,
        tags=sweep.tags,
        counts=counts,
        total=sum(counts.values()),
    )


# A job's status in one row: the job, what its result measured and ran, its crash's signature.
_JOB_STATUS_COLUMNS = (
    Job.id.label("job_id"), Job.cell_index, Job.repeat, Job.gpu_kind, Job.backend, Job.graph_mode, Job.method,
    Job.mode, Job.concurrency, Job.env,
    Job.state, Job.attempts, Job.pair_id, Job.pair_order, Result.acceptance_rate, Result.tokens_per_s, Result.resolved_backend,
    Result.resolved_graph_mode, Result.graph_downgraded, Result.draft_eager,
    CrashSignature.signature.label("crash_signature"),
)


def job_statuses(*, session: Session, sweep_id: int) -> list[JobStatus]:
    """Every job of the sweep in job order, in one query (a sweep page is read far more than written)."""
    stmt = (
        select(*_JOB_STATUS_COLUMNS)
        .outerjoin(Result, Result.job_id == Job.id)
        .outerjoin(Crash, Crash.job_id == Job.id)
        .outerjoin(CrashSignature, CrashSignature.id == Crash.signature_id)
        .where(Job.sweep_id == sweep_id)
        .order_by(Job.id)
    )
    # Without a result the outer join gives NULL flags: nothing ran, so nothing was downgraded.
    return [
        JobStatus(**{**row._mapping, "graph_downgraded": bool(row.graph_downgraded), "draft_eager": bool(row.draft_eager)})
        for row in session.execute(stmt)
    ]


def detail(*, session: Session, sweep: Sweep, lease_seconds: float) -> SweepDetail:
    base = summary(session=session, sweep=sweep)
    partner = pairing.partner(session=session, sweep_id=sweep.id)
    seconds, timed = device_time(session=session, sweep_id=sweep.id)
    return SweepDetail(
        **base.model_dump(),
        spec=sweep.spec,
        jobs=job_statuses(session=session, sweep_id=sweep.id),
        warnings=warnings(session=session, sweep_id=sweep.id, lease_seconds=lease_seconds),
        paired_with=partner,
        gpu_seconds=seconds,
        timed_jobs=timed,
    )


def device_time(*, session: Session, sweep_id: int) -> tuple[float, int]:
    """Device seconds the sweep's jobs took, ``sum over jobs that ended of (finished_at - started_at) x max(1,
    gpus_needed)``, and how many jobs that sums. A cell of the CPU engine (0 GPUs) counts as one device, so a budget
    of starts means the same there; a job returned to the queue counts the attempt that ended it only (its start is
    the last claim's)."""
    rows = session.execute(
        select(Job.started_at, Job.finished_at, Job.gpus_needed)
        .where(Job.sweep_id == sweep_id, Job.started_at.is_not(None), Job.finished_at.is_not(None))
    ).all()
    return sum(max((finished - started).total_seconds(), 0.0) * max(gpus, 1) for started, finished, gpus in rows), len(rows)


def warnings(*, session: Session, sweep_id: int, lease_seconds: float) -> list[str]:
    """Why the sweep's queued jobs may wait: no live worker serves their GPU kind, build and GPU count (and, for a
    pair that has not started, the partner's build too); and which of a paired sweep's jobs run alone."""
    partner = pairing.partner(session=session, sweep_id=sweep_id)
    partner_build = session.scalar(select(Sweep.build).where(Sweep.id == partner)) if partner is not None else None
    claimable = Job.attempts < Job.max_attempts
    rows = session.execute(
        select(Job.gpu_kind, Job.build, Job.gpus_needed, Job.pair_id.is_not(None), claimable, func.count())
        .where(Job.sweep_id == sweep_id, Job.state == JobState.QUEUED)
        .group_by(Job.gpu_kind, Job.build, Job.gpus_needed, Job.pair_id.is_not(None), claimable)
        .order_by(Job.gpu_kind, Job.build, Job.gpus_needed)
    ).all()
    needs = [workers.Need(gpu_kind=kind, build=build, gpus=gpus, jobs=count,
                          partner_build=partner_build if paired and partner_build != build else None)
             for kind, build, gpus, paired, may, count in rows if may]
    said = workers.unserved(session=session, needs=needs, lease_seconds=lease_seconds)
    if left := sum(count for *_, may, count in rows if not may):
        # Imported: the cells its run never reached (``app.sweeps.imports``).
        said.append(f"{left} job(s) never ran where this sweep ran: they stay queued to be seen, and no worker here "
                    "runs them")
    alone = pairing.unpaired(session=session, sweep_id=sweep_id) if partner is not None else 0
    if alone:
        said.append(f"{alone} job(s) run alone, unpaired: their partner in sweep {partner} had started when the two "
                    "sweeps were paired")
    return said
