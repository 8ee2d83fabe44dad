"""Two runs (sweeps or builds) side by side: every cell they share, with its change and verdict, worst first.

The verdict rule is ``app.analysis.verdicts`` (the numbers) under ``app.analysis.compare_cells`` (what ran).
This is the table behind the ``/compare`` page, ``GET /api/v1/compare`` and the CI comment.
"""

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app import db, newest
from app.analysis import verdicts
from app.analysis.compare_cells import SEVERITY, Side, verdict
from app.analysis.fallback import Ratio, ratio
from app.analysis.noise import NoiseClass
from app.analysis.proportions import ProportionChange
from app.cells import identity, pooling
from app.cells import service as cells
from app.cells.identity import Identity
from app.cells.pooling import PooledCell
from app.cells.scope import CellScope
from app.enums import JobState, Verdict
from app.lru import LRU
from app.models import Job, Result, Sweep
from app.noise import service as noise_service
from app.noise.service import ClassNoise


@dataclass(frozen=True)
class Change:
    base: PooledCell
    head: PooledCell
    speed: Ratio | None  # head / base tokens/s with the interval its call read (``speed_ratio``)
    numbers: verdicts.Verdict | None  # the statistics' verdict when both sides ran
    verdict: Verdict
    # Head / base tokens per joule (``fallback.ratio`` of the pooled cells), where both sides' GPUs reported energy.
    per_joule: Ratio | None = None

    @property
    def acceptance(self) -> ProportionChange | None:
        """Head - base acceptance with Newcombe's interval, when both sides drafted."""
        return self.numbers.acceptance if self.numbers else None

    @property
    def reasons(self) -> tuple[str, ...]:
        """The statistics' reasons, after what either side left out of them (``PooledCell.notes``)."""
        return (*self.base.notes, *self.head.notes, *(self.numbers.reasons if self.numbers else ()))


def compare(base: list[PooledCell], head: list[PooledCell], history: dict[Identity, list[float]] | None = None,
            noise: dict[NoiseClass, ClassNoise] | None = None, *, alpha: float = verdicts.SPEED_ALPHA) -> list[Change]:
    """Cells of the same measured identity (``app.cells.identity``) on both sides, worst verdict first, then by speed ratio (slowest first).

    ``noise``: each class's noise (``app.noise.service.spreads``: between starts, and between the halves of A/A
    pairs), by which a cell's tokens/s is called at the two-sided level ``alpha`` where its class has one (by the
    differences of its pairs of starts, where both sides ran halves of pairs); ``history``: per cell, its tokens/s
    on earlier builds of the same GPU kind, oldest first (``histories``), from which ``verdicts.history_threshold``
    learns what counts as a change where no model is.
    """
    before = {c.identity: c for c in base}
    changes = []
    for cell in head:
        old = before.get(cell.identity)
        if old is None:
            continue
        numbers = None
        if old.repeats and cell.repeats:
            known = (noise or {}).get(noise_service.noise_class(cell))
            numbers = verdicts.cell_verdict(
                pooling.sample(old), pooling.sample(cell), history=(history or {}).get(cell.identity, ()),
                noise=known.between if known else None, paired_noise=known.paired if known else None,
                pairs=pooling.pairs(old, cell), speed_alpha=alpha)
        speed = speed_ratio(old, cell, numbers)
        judged = verdict(_side(old), _side(cell), numbers)
        per_joule = ratio(cell.per_joule, old.per_joule) if cell.per_joule and old.per_joule else None
        changes.append(Change(old, cell, speed, numbers, judged, per_joule))
    return sorted(changes, key=lambda c: (SEVERITY[c.verdict], c.speed.value if c.speed else 1.0))


def speed_ratio(base: PooledCell, head: PooledCell, numbers: verdicts.Verdict | None) -> Ratio | None:
    """Head / base tokens/s as a comparison shows it: with the interval the verdict read where a noise model or pairs
    called it (a ratio of geometric means over the starts), else the pooled cells' ratio (``fallback.ratio``: the
    pages' interval of each cell carried to the ratio)."""
    if numbers is not None and numbers.throughput.detectable is not None:
        found = numbers.throughput.ratio
        return Ratio(found.ratio, found.low, found.high)
    return ratio(head.speed, base.speed) if head.speed and base.speed else None


def _side(cell: PooledCell) -> Side:
    # An eager draft counts beside a graphed target only: with graph mode NONE every draft is eager.
    return Side(bool(cell.ran), cell.downgraded, cell.draft_eager and cell.graph_mode != "NONE", died=bool(cell.died))


def between(*, session: Session, base: CellScope | None, head: CellScope | None,
            alpha: float = verdicts.SPEED_ALPHA) -> tuple[list[PooledCell], list[PooledCell], list[Change]]:
    """Load both sides (None: a side not named, no cells) and compare them, each head cell by its class's noise
    model, or without one against its own history on the other builds. Returns (base cells, head cells, changes)."""
    sides = [cells.load(session=session, scope=scope) if scope else [] for scope in (base, head)]
    history = histories(session=session, head=sides[1], exclude={c.build for c in sides[0] + sides[1]})
    noise = noise_service.spreads(session=session) if sides[1] else {}
    return sides[0], sides[1], compare(*sides, history=history, noise=noise, alpha=alpha)


def histories(*, session: Session, head: list[PooledCell], exclude: set[str]) -> dict[Identity, list[float]]:
    """Each head cell's tokens/s on the last ``verdicts.LOOKBACK`` other builds (not in ``exclude``: the two
    compared) that ran on its GPU kinds, oldest build first.

    A build's point is the mean of its repeats' medians there (Conbench's per-commit mean), averaged in SQL per
    build and config (``_build_means``), so a page reads one row per build and config, not one per job. Builds are
    ordered by their first finished job. Medians beyond ``MAX_TOKENS_PER_S`` are left out, as
    ``app.cells.pooling.add`` leaves them out: one stored 1e308 overflowed PostgreSQL's mean and refused every
    comparison of its GPU kind.
    """
    if not head:
        return {}
    wanted = {c.identity for c in head}
    gpu_kinds = sorted({k[0] for k in wanted})
    recent = _last_builds(session=session, gpu_kinds=gpu_kinds, exclude=exclude)
    rows = _build_means(session=session, builds=recent)
    variants = identity.variants(session=session, hashes={r.config_hash for r in rows})
    # (cell, build) -> [sum of tokens/s, repeats, first finished]: configs that differ only in what the identity
    # ignores (the timeout, rounds, window) fold into one point.
    points: dict[Identity, dict[str, list]] = defaultdict(dict)
    for r in rows:
        key = identity.measured(r, identity.counted(variants[r.config_hash], r.empty_as_failed))
        if key not in wanted:
            continue
        point = points[key].setdefault(r.build, [0.0, 0, r.first])
        point[0] += r.mean * r.n
        point[1] += r.n
        if r.first is not None and (point[2] is None or r.first < point[2]):
            point[2] = r.first
    return {
        key: [total / n for total, n, _ in sorted(by_build.values(), key=lambda p: (p[2] is None, p[2] or 0))]
        for key, by_build in points.items()
    }


# Each build's means (``_build_means``), kept per process and database. A succeeded job's result and its tokens/s
# are written once (``draftbench rederive`` reads what ran again, never the speed), so a build's means move only
# when one of its jobs succeeds or is removed, which its succeeded jobs' count, newest finish and ids tell.
_MEANS: LRU[tuple, list] = LRU(256)


def _build_means(*, session: Session, builds: list[str]) -> list:
    """Per build, GPU kind, backend, graph mode, config hash and way of counting (``Result.empty_as_failed``): its
    succeeded jobs' mean tokens/s (``mean``), how many (``n``) and the first one's finish (``first``); read in one
    grouped query for the builds not kept or moved since (``_MEANS``), the others as kept."""
    url = str(session.get_bind().url)
    versions = {
        build: (url, build, count, newest, ids) for build, count, newest, ids in session.execute(
            select(Job.build, func.count(), func.max(Job.finished_at), func.sum(Job.id))
            .where(Job.state == JobState.SUCCEEDED, Job.build.in_(builds)).group_by(Job.build))
    }
    kept = {build: _MEANS.get(key) for build, key in versions.items()}
    missing = sorted(build for build, rows in kept.items() if rows is None)
    if missing:
        stmt = (
            select(Job.build, Job.gpu_kind, Job.backend, Job.graph_mode, Job.config_hash, Result.empty_as_failed,
                   func.min(Job.finished_at).label("first"), func.avg(Result.tokens_per_s).label("mean"),
                   func.count().label("n"))
            .join(Result, Result.job_id == Job.id)
            .where(Job.state == JobState.SUCCEEDED, Job.build.in_(missing), cells.plausible_speed_sql())
            .group_by(Job.build, Job.gpu_kind, Job.backend, Job.graph_mode, Job.config_hash, Result.empty_as_failed)
        )
        read: dict[str, list] = {build: [] for build in missing}
        for row in db.plain(session.connection().execute(stmt)):
            read[row.build].append(row)
        for build, rows in read.items():
            _MEANS.put(versions[build], rows)
            kept[build] = rows
    return [row for rows in kept.values() for row in rows]


def _last_builds(*, session: Session, gpu_kinds: list[str], exclude: set[str]) -> list[str]:
    """The last ``verdicts.LOOKBACK`` builds (not in ``exclude``) by their newest succeeded job on ``gpu_kinds``.

    The builds come from the sweeps (a job runs its sweep's build), each one's newest job from
    ``ix_jobs_build_finished`` (state, build, finished_at, gpu_kind): one index range per build, not a grouping of
    every succeeded job.
    """
    builds = select(Sweep.build).where(Sweep.build.not_in(sorted(exclude))).distinct().subquery()
    newest = (
        select(func.max(Job.finished_at))
        .where(Job.state == JobState.SUCCEEDED, Job.build == builds.c.build, Job.gpu_kind.in_(gpu_kinds))
        .scalar_subquery()
    )
    ranked = select(builds.c.build, newest.label("newest")).subquery()
    return list(session.scalars(
        select(ranked.c.build).where(ranked.c.newest.is_not(None))
        .order_by(ranked.c.newest.desc()).limit(verdicts.LOOKBACK)
    ))


def default_pair(*, session: Session) -> tuple[int, int] | None:
    """(base, head) when none is named: the newest sweep and the newest earlier sweep of the same name
    (``app.newest.SWEEPS``)."""
    head = session.execute(select(Sweep.id, Sweep.name).order_by(*newest.SWEEPS).limit(1)).first()
    if head is None:
        return None
    base = session.scalar(
        select(Sweep.id).where(Sweep.name == head.name, Sweep.id != head.id).order_by(*newest.SWEEPS).limit(1)
    )
    return (base, head.id) if base is not None else None
