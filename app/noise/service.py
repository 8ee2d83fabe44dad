"""The noise model of every GPU kind, from every A/A the store holds (``app.analysis.noise``).

Every cell (build x measured identity, as ``app.cells.service.load`` pools them: every sweep of one build) with
at least two succeeded starts is an A/A group: its starts' log tokens/s give the between-start spread, each
start's rounds the within-start spread, and each pair of its starts run back to back (paired sweeps of one
build, ``app.sweeps.pairing``) the spread of a pair's difference. Groups pool per ``NoiseClass``: GPU kind x
backend x graph mode x method class x mode.
"""

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import String, func, select, type_coerce
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.noise import (
    NoiseClass,
    Spread,
    fewest_holding,
    group_terms,
    log_values,
    min_detectable_effect,
    paired_aa_spread,
    pooled_spread,
    pooled_terms,
    uneven_starts,
)
from app.cells import identity
from app.cells.pooling import PooledCell
from app.cells.service import plausible_speed_sql
from app.db import session_scope
from app.enums import JobState
from app.lru import LRU
from app.models import Job, Result, Worker

# Starts a side the model's smallest detectable change is given for (the page's columns, the API's list).
MDE_STARTS = (3, 8)


@dataclass(frozen=True)
class ClassNoise:
    """One class's noise: the between-start spread of ln tokens/s (``between``), the within-start one between
    rounds (``within``, None where no start kept two rounds), the spread of the difference of two starts run back
    to back (``paired``, None where no A/A pair ran), and where it was learned."""

    noise_class: NoiseClass
    between: Spread
    within: Spread | None
    paired: Spread | None
    newest: datetime | None
    hosts: tuple[str, ...]  # the workers' hosts that ran its starts (none for imported ones)
    gpu_names: tuple[str, ...]
    # Where its starts came from: the builds and sweeps that ran them (an imported start has no host to say it).
    builds: tuple[str, ...] = ()
    sweep_ids: tuple[int, ...] = ()
    oldest: datetime | None = None  # when its first start pooled finished
    # The fewest starts that hold half of ``within``'s squared deviations (``fewest_holding``); None without it.
    within_half_from: int | None = None
    # Whether a start's rounds spread far beyond the others' (``uneven_starts``): then ``within`` rests on a few starts.
    within_uneven: bool = False

    def detectable(self, starts: int) -> float:
        """The smallest relative change ``starts`` starts a side find four times in five (``min_detectable_effect``)."""
        return min_detectable_effect(self.between, starts, starts)


@dataclass
class _Cell:
    noise_class: NoiseClass
    build: str = ""
    starts: list[float] = field(default_factory=list)  # each start's ln tokens/s (its rounds' median)
    rounds: list[tuple[int, float]] = field(default_factory=list)  # each start's rounds' terms (``round_terms``)
    halves: dict[str, dict[int, float]] = field(default_factory=dict)  # pair id -> pair order -> ln tokens/s

    def differences(self) -> list[float]:
        """Each whole pair's second half less its first (ln tokens/s)."""
        return [h[1] - h[0] for h in self.halves.values() if len(h) == 2]
    newest: Any = None  # the newest finish: as the driver gives it while reading, then a datetime
    oldest: Any = None  # the first finish, likewise
    sweeps: set[int] = field(default_factory=set)
    workers: set[int] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    gpu_names: set[str] = field(default_factory=set)


# The model of each database as of its results (their count and newest id): it changes only when a job succeeds,
# which stores its result in the same transaction (``app.results.service.record``; a succeeded job and its result
# are never changed or removed after), and reading every start costs a few hundred ms at 100k results. Counting the
# succeeded jobs and their newest finish told the same but cost 35 ms a compare on PostgreSQL (an index scan of every
# job), where the results' count and newest id cost 4. One model serves the page and the verdicts: reading it without
# the rounds' terms cost no less (0.8-1.1 s either way at 100k results on SQLite, 2026-12-04), and two kept variants
# had the schedule read the store again after a comparison had just read it.
_KNOWN: LRU[tuple, list[ClassNoise]] = LRU(8)


def model(*, session: Session) -> list[ClassNoise]:
    """:func:`read`, kept per database and process until another job succeeds (the results' count and newest id
    tell)."""
    url = str(session.get_bind().url)
    key = (url, *session.execute(select(func.count(), func.max(Result.id))).one())
    found = _KNOWN.get(key)
    if found is None:
        found = read(session=session)
        _KNOWN.put(key, found)
    return found


def spreads(*, session: Session) -> dict[NoiseClass, ClassNoise]:
    """Each class's noise as the verdicts read it: :func:`model` by class."""
    return {c.noise_class: c for c in model(session=session)}


def refresh(sessions: sessionmaker[Session]) -> None:
    """:func:`model` in its own session, for the service's start and schedule (``app.periodic``): read again only
    once another job has succeeded, so neither a comparison's first reader after it nor the first view of ``/noise``
    waits for every start's row (0.8 to 1.1 s at 100k results)."""
    with session_scope(sessions) as session:
        model(session=session)


def noise_class(cell: PooledCell) -> NoiseClass:
    """The class whose noise holds for ``cell``: its GPU kind, backend, graph mode, draft or none, and mode (serving
    with its clients)."""
    return NoiseClass.of(cell.gpu_kind, cell.backend, cell.graph_mode, cell.method, cell.mode, cell.concurrency)


def read(*, session: Session) -> list[ClassNoise]:
    """Every class's noise, in class order, from every cell of every build with at least two succeeded starts.

    One query over the succeeded jobs with a plausible speed (``plausible_speed_sql``, as pooling leaves the others
    out), one row per start of the few columns the model needs (each start's rounds as the terms kept with it,
    ``Result.round_speeds`` and ``round_squares``), and one over the workers for their hosts. Nothing per cell.

    A cell is a build's starts of one measured identity (``identity.measured``). A config's GPU kind, backend,
    graph mode, method, mode and concurrency are its job's columns and in its identity, so configs that differ in
    one of them are never one cell: only where two configs share all of them (and the build) is a variant read to
    tell whether they measured the same (``_identities``). Reading every config's variant cost most of a second
    at 100k results, where each build has configs of its own.
    """
    plausible = (Job.state == JobState.SUCCEEDED, plausible_speed_sql())
    place = (Job.build, Job.gpu_kind, Job.backend, Job.graph_mode, Job.method, Job.mode, Job.concurrency, Job.config_hash,
             Result.empty_as_failed)
    # Each finish as the driver gives it (SQLite: the stored UTC text, whose order is the time's): made a datetime
    # once per cell (``_finish``), as making 100k of them cost more than the rest of the row.
    finished = type_coerce(Job.finished_at, String).label("finished")
    starts = session.connection().execute(
        select(*place, Result.tokens_per_s, Job.pair_id, Job.pair_order, Result.round_speeds, Result.round_squares, finished, Job.worker_id,
               Result.gpu_name, Job.sweep_id)
        .join(Result, Result.job_id == Job.id).where(*plausible).order_by(Job.id)
    ).all()
    cell_of = _identities(session, {row[:9] for row in starts})
    cells: dict[tuple, _Cell] = {}
    of_place: dict[tuple, _Cell] = {}  # each place's cell, so a start costs one look-up
    for row in starts:
        place = row[:9]
        cell = of_place.get(place)
        if cell is None:
            key = cell_of[place]
            cell = cells.get(key)
            if cell is None:
                cell = cells[key] = _Cell(NoiseClass.of(*place[1:7]), place[0])  # GPU kind to concurrency, as ``place`` lists them
            of_place[place] = cell
        speed, pair_id, pair_order, speeds, squares, finish, worker_id, gpu_name, sweep_id = row[9:]
        cell.sweeps.add(sweep_id)
        start = math.log(speed)
        cell.starts.append(start)
        if pair_id is not None:
            cell.halves.setdefault(pair_id, {})[pair_order] = start
        cell.rounds.append((speeds or 0, squares or 0.0))
        if finish is not None:
            if cell.newest is None or finish > cell.newest:
                cell.newest = finish
            if cell.oldest is None or finish < cell.oldest:
                cell.oldest = finish
        if worker_id is not None:
            cell.workers.add(worker_id)
        if gpu_name:
            cell.gpu_names.add(gpu_name)
    kept = [c for c in cells.values() if len(c.starts) >= 2]
    hosts = dict(session.execute(select(Worker.id, Worker.host)).all()) if kept else {}
    as_datetime = _finish(session)
    for cell in kept:
        cell.newest = as_datetime(cell.newest) if cell.newest is not None else None
        cell.oldest = as_datetime(cell.oldest) if cell.oldest is not None else None
        cell.hosts = {hosts[w] for w in cell.workers if hosts.get(w)}
    return _pooled(kept)


def _finish(session: Session) -> Callable[[Any], datetime]:
    """What turns a finish read as the driver gives it into the datetime ``Job.finished_at`` reads."""
    dialect = session.get_bind().dialect
    process = Job.__table__.c.finished_at.type.dialect_impl(dialect).result_processor(dialect, None)
    return process or (lambda value: value)


def _identities(session: Session, places: set[tuple]) -> dict[tuple, tuple]:
    """Each place (build, GPU kind, backend, graph mode, method, mode, concurrency, config hash, way of counting) to
    its cell's key: the place itself where no other config or way of counting shares the rest of it, else the rest
    with the config's measured variant as counted (``identity.variants`` read for those configs alone,
    ``identity.counted``)."""
    configs: dict[tuple, set[tuple]] = defaultdict(set)
    for place in places:
        configs[place[:7]].add(place[7:])
    shared = {place[7] for place in places if len(configs[place[:7]]) > 1}
    variants = identity.variants(session=session, hashes=shared)
    return {
        place: (*place[:7], identity.counted(variants[place[7]], place[8]).measured) if place[7] in shared else place
        for place in places
    }


def round_speeds(rounds: list[dict] | None) -> list[float]:
    """Each stored round's tokens/s, ``output_tokens / seconds`` (as the service takes their median); rounds of no
    time are left out."""
    return [r["output_tokens"] / r["seconds"] for r in rounds or [] if r.get("seconds", 0) > 0]


def round_terms(rounds: list[dict] | None) -> tuple[int, float]:
    """A start's share of the spread within starts, kept with its result (``Result.round_speeds`` and
    ``round_squares``): how many of its stored ``rounds`` measured a speed, and their ln tokens/s' squared deviations
    from their mean (``group_terms``)."""
    return group_terms(log_values(round_speeds(rounds)))


def _pooled(cells: list[_Cell]) -> list[ClassNoise]:
    by_class: dict[NoiseClass, list[_Cell]] = defaultdict(list)
    for cell in cells:
        by_class[cell.noise_class].append(cell)
    found = []
    for noise_class in sorted(by_class, key=lambda c: (c.gpu_kind, c.backend, c.graph_mode, c.method_class, c.mode, c.concurrency or 0)):
        group = by_class[noise_class]
        dates = [c.newest for c in group if c.newest is not None]
        firsts = [c.oldest for c in group if c.oldest is not None]
        rounds = [r for c in group for r in c.rounds]
        within = pooled_terms(rounds)
        found.append(ClassNoise(
            noise_class,
            between=pooled_spread(c.starts for c in group),
            within=within,
            paired=paired_aa_spread([d for c in group for d in c.differences()]),
            newest=max(dates, default=None),
            hosts=tuple(sorted(set().union(*(c.hosts for c in group)))),
            gpu_names=tuple(sorted(set().union(*(c.gpu_names for c in group)))),
            within_half_from=fewest_holding(squares for size, squares in rounds if size >= 2) if within else None,
            within_uneven=uneven_starts(rounds),
            builds=tuple(sorted({c.build for c in group})),
            sweep_ids=tuple(sorted(set().union(*(c.sweeps for c in group)))),
            oldest=min(firsts, default=None),
        ))
    return found
