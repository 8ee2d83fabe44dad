"""Jobs folded into pooled cells (``app.cells.pooling``): what the dashboards, the alarm and comparisons read,
one per cell with its repeats pooled, each against its baseline."""

from dataclasses import replace

from sqlalchemy import ColumnElement, and_, case, false, func, or_, select
from sqlalchemy.orm import Session

from app import db, newest
from app.analysis.acceptance import lossless_share
from app.analysis.fallback import pool_repeats, ratio
from app.cells import identity, pooling
from app.cells.pooling import PooledCell
from app.cells.scope import CellScope
from app.crashes import service as crashes
from app.enums import JobState
from app.models import Crash, CrashSignature, Job, Result, Sweep
from app.schemas.physical import MAX_TOKENS_PER_S

# Whether a dead job's log was kept (``PooledCell.crashed_in``), looked up for the dead jobs alone: a CASE reaches its
# branch only where it is taken, so the jobs that did not die cost nothing.
_CRASH_LOGGED = case((Crash.id.is_not(None), crashes.log_kept(Job.id)), else_=false()).label("crash_logged")

_COLUMNS = (
    Job.id, Job.sweep_id, Job.build, Job.gpu_kind, Job.backend, Job.graph_mode, Job.method, Job.config_hash,
    Job.state, Job.started_at, Job.finished_at, Job.repeat, Job.concurrency, Job.mode, Job.pair_id,
    Result.id.label("result_id"), Result.tokens_per_s, Result.tokens_per_s_low, Result.tokens_per_s_high,
    Result.tokens_per_s_level, Result.rounds, Result.tokens_per_joule, Result.tokens_per_joule_low,
    Result.tokens_per_joule_high, Result.energy_reason,
    Result.num_drafts, Result.num_draft_tokens, Result.num_accepted_tokens, Result.accepted_per_position,
    Result.mean_acceptance_length, Result.mean_acceptance_length_low, Result.mean_acceptance_length_high,
    Result.resolved_graph_mode, Result.resolved_draft_graph_mode, Result.graph_downgraded, Result.draft_eager,
    Result.async_scheduling_off, Result.vllm_version, Result.gpu_name, Result.serving,
    Result.empty_as_failed, Result.source, Crash.kind.label("crash_kind"), _CRASH_LOGGED, CrashSignature.signature, CrashSignature.title,
    Sweep.name.label("sweep_name"),
)


def plausible_speed_sql() -> ColumnElement[bool]:
    """A stored tokens/s the statistics read, in SQL: above 0 and within ``MAX_TOKENS_PER_S``, as pooling keeps a
    repeat (``app.cells.pooling``; rows stored before the ceilings may hold anything)."""
    return and_(Result.tokens_per_s > 0, Result.tokens_per_s <= MAX_TOKENS_PER_S)


def load(*, session: Session, scope: CellScope, speedups: bool = True) -> list[PooledCell]:
    """The cells in scope, in matrix order, each with its speedup against its baseline cell and the share of its
    outputs that match the baseline's (lossless), where the sweep ran baselines. A scope naming a method reads
    the baselines beside its cells, for those, and returns that method's cells; ``speedups=False`` reads that
    method's cells alone, without either (for a page that shows neither). Two queries (one more for a method's
    baselines), three with baselines; nothing per cell."""
    stmt = (
        select(*_COLUMNS)
        .join(Sweep, Sweep.id == Job.sweep_id)
        .outerjoin(Result, Result.job_id == Job.id)
        .outerjoin(Crash, Crash.job_id == Job.id)
        .outerjoin(CrashSignature, CrashSignature.id == Crash.signature_id)
    )
    cells: dict[tuple, PooledCell] = {}
    with_baselines: set[int] = set()
    # Core rows, not ORM ones, as plain tuples (``app.db.plain``): thousands of them, and nothing here needs an
    # identity map.
    rows = db.plain(session.connection().execute(scope.apply(stmt).order_by(Job.id)))
    if scope.method is not None and speedups:
        # Apart: SQLite answers one query for "this method or none" by scanning every job, not the cell index.
        theirs = replace(scope, method=None).apply(stmt).where(Job.method.is_(None)).order_by(Job.id)
        rows = sorted([*rows, *db.plain(session.connection().execute(theirs))], key=lambda row: row.id)
    variants = identity.variants(session=session, hashes={row.config_hash for row in rows})
    for row in rows:
        variant = identity.counted(variants[row.config_hash], bool(row.empty_as_failed))
        key = (row.build, identity.measured(row, variant))
        cell = cells.get(key)
        if cell is None:
            cell = cells[key] = PooledCell(row.build, row.gpu_kind, row.backend, row.graph_mode, row.method, variant, "",
                                           concurrency=row.concurrency, mode=row.mode)
        _add(cell, row)
        if row.method is None:
            with_baselines.add(row.sweep_id)
    _label(cells.values())
    found = sorted(cells.values(), key=lambda c: (c.build, c.gpu_kind, c.label, c.backend, c.graph_mode))
    for cell in found:
        if cell.repeats:
            cell.speed = pool_repeats(cell.repeats)
        if cell.energy_repeats:
            cell.per_joule = pool_repeats(cell.energy_repeats)
    _speedups(found)
    if with_baselines:
        _lossless(session, scope, with_baselines, cells)
    return found if scope.method is None else [c for c in found if c.method == scope.method]


def with_requests(*, session: Session, scope: CellScope, cells: list[PooledCell]) -> list[PooledCell]:
    """``cells`` (``load`` of ``scope``) with their starts' requests by prompt category pooled (``PooledCell.requests``).
    Apart from ``load``: only the pages that show them read the column (a few hundred bytes of JSON per result), and
    only its stored values (one query, results without them left out). Returns ``cells``."""
    by_job = {job_id: cell for cell in cells for job_id in cell.measured_in}
    stmt = (select(Result.job_id, Result.request_acceptance).join(Job, Job.id == Result.job_id)
            .where(Result.request_acceptance.is_not(None)))
    for job_id, stored in session.execute(scope.apply(stmt).order_by(Result.job_id)).tuples():
        if job_id in by_job:
            pooling.add_requests(by_job[job_id], stored)
    return cells


def _add(cell: PooledCell, row) -> None:
    cell.job_ids.append(row.id)
    if row.sweep_id not in cell.sweep_ids:
        cell.sweep_ids.append(row.sweep_id)
        cell.sweep_names.append(row.sweep_name)
    cell.states[row.state] += 1
    finished = row.finished_at
    if finished is not None:
        if cell.ran_at is None or finished > cell.ran_at:
            cell.ran_at = finished
        newest = cell.sweeps_ran.get(row.sweep_id)
        if newest is None or finished > newest:
            cell.sweeps_ran[row.sweep_id] = finished
    began = row.started_at or finished
    if began is not None and (cell.first_ran_at is None or began < cell.first_ran_at):
        cell.first_ran_at = began
    if row.crash_kind is not None:
        cell.crash_kinds[str(row.crash_kind)] += 1
        cell.crash_signature, cell.crash_title = row.signature, row.title
        cell.crash_groups[(str(row.crash_kind), row.signature, row.title)] += 1
        if row.crash_logged:
            cell.crashed_in.append(row.id)
    if row.result_id is not None:
        pooling.add(cell, row, job_id=row.id, pair_id=row.pair_id)
        cell.measured_in[row.id] = row.sweep_id


def _label(cells) -> None:
    """Every cell's label, decided over all the cells read at once (``identity.labels``): one per config."""
    labels = identity.labels({c.variant.measured: c.variant for c in cells}.values())
    for cell in cells:
        cell.label = labels[cell.variant.measured]


def baselines(cells: list[PooledCell]) -> dict[tuple, PooledCell]:
    """Each speculative cell's baseline among ``cells``, by the cell's key: the cell of the same build whose measured
    identity is the speculative cell's ``identity.baseline`` (so a serving cell's has the same concurrency)."""
    found = {c.key: c for c in cells if c.method is None}
    return {c.key: base for c in cells
            if c.method is not None and (base := found.get((c.build, identity.baseline(c, c.variant)))) is not None}


def _speedups(cells: list[PooledCell]) -> None:
    paired = baselines(cells)
    for cell in cells:
        base = paired.get(cell.key)
        if base is not None and cell.speed and base.speed:
            cell.speedup = ratio(cell.speed, base.speed)


def _lossless(session: Session, scope: CellScope, sweep_ids: set[int], cells: dict[tuple, PooledCell]) -> None:
    """Per repeat, the outputs equal to its baseline's (``app.cells.identity.baseline``, same sweep and repeat), summed."""
    stmt = (
        select(Job.sweep_id, Job.build, Job.gpu_kind, Job.backend, Job.graph_mode, Job.repeat, Job.method, Job.config_hash,
               Result.empty_as_failed, Result.raw["requests"].label("requests"))
        .join(Result, Result.job_id == Job.id)
        .where(Job.sweep_id.in_(sorted(sweep_ids)))
    )
    # The scope's baselines too: they share its axes, build and sweep, but not its method (the sweeps' ids pick the rows).
    stmt = replace(scope, method=None).apply(stmt)
    if scope.method is not None:
        stmt = stmt.where(or_(Job.method == scope.method, Job.method.is_(None)))
    rows = db.plain(session.connection().execute(stmt))
    known = identity.variants(session=session, hashes={r.config_hash for r in rows})
    variants = [identity.counted(known[r.config_hash], r.empty_as_failed) for r in rows]
    prints = {
        (r.sweep_id, r.repeat, identity.measured(r, variant)): [q["fingerprint"] for q in r.requests or []]
        for r, variant in zip(rows, variants, strict=True) if r.method is None
    }
    for r, variant in zip(rows, variants, strict=True):
        if r.method is None:
            continue
        theirs = prints.get((r.sweep_id, r.repeat, identity.baseline(r, variant)))
        mine = [q["fingerprint"] for q in r.requests or []]
        cell = cells.get((r.build, identity.measured(r, variant)))
        if cell is None or not theirs or len(theirs) != len(mine):
            continue
        cell.lossless_same += round(lossless_share(mine, theirs) * len(mine))
        cell.lossless_total += len(mine)


def sweep_gpu_kinds(*, session: Session, sweep_ids: list[int]) -> dict[int, list[str]]:
    """Each sweep's GPU kinds as its spec gives them (its jobs were made from them; ``gpus``, the deprecated name, in a
    spec stored under it), in one query that reads those fields alone (a spec can be large): what a list of sweeps
    names beside each, so an H100's sweeps read H100."""
    if not sweep_ids:
        return {}
    stmt = select(Sweep.id, Sweep.spec["gpu_kinds"], Sweep.spec["gpus"]).where(Sweep.id.in_(sweep_ids))
    return {sweep_id: [str(k) for k in kinds] if isinstance(kinds := named if named is not None else old, list) else []
            for sweep_id, named, old in session.execute(stmt).all()}


RECENT_SWEEPS = 10


def recent_builds(*, session: Session, sweeps: int = RECENT_SWEEPS) -> tuple[str, ...]:
    """The builds of the newest ``sweeps`` sweeps: what pages and the alarm read when no filter names a build or
    a sweep (reading every build would mix them and read every result ever stored)."""
    recent = select(Sweep.build).order_by(*newest.SWEEPS).limit(sweeps).subquery()
    return tuple(sorted(set(session.scalars(select(recent.c.build)))))


def latest_cell(*, session: Session) -> dict[str, str | None] | None:
    """GPU kind, method, backend and graph mode of the newest speculative result (``app.newest.RESULTS``): the history
    a page shows unasked.

    Found through the jobs, build by build on ``ix_jobs_build_finished`` (state, build, finished_at): a result's time is
    its job's end, so each build's last end is found, then the results of the jobs that ended at the latest of them.
    Ordering every result by its time reads them all (135 ms on SQLite over 100,000 results, against 1 ms). A
    succeeded job is one with a result, and a job runs its sweep's build.
    """
    measured = (Job.state == JobState.SUCCEEDED, Job.method.is_not(None))
    builds = select(Sweep.build).distinct().subquery()
    last = select(func.max(Job.finished_at)).where(*measured, Job.build == builds.c.build).scalar_subquery()
    ends = session.execute(select(builds.c.build, last)).all()
    latest = max((end for _, end in ends if end is not None), default=None)
    if latest is None:
        return None
    row = session.execute(
        select(Job.gpu_kind, Job.method, Job.backend, Job.graph_mode).join(Result, Result.job_id == Job.id)
        .where(*measured, Job.build.in_([build for build, end in ends if end == latest]), Job.finished_at == latest)
        .order_by(*newest.RESULTS).limit(1)
    ).first()
    return dict(row._mapping) if row else None
