"""The graph-capture correctness alarm over cells: each graphed cell against its eager sibling, judged per build and
GPU kind and stored, so that pages find every alarm of every build without reading results.

The sibling is the same cell of the same build (``app.cells.identity``: the same variant) with graph mode NONE
on the same backend, else on another backend (the draft proposes the same tokens whatever the backend, up to
rounding). The rule and its statistics are ``app.analysis.alarms``.

One function per question: :func:`judge` finds the alarms among pooled cells; :func:`refresh` rewrites what is
stored of one build on one GPU kind from all their results (when a job of theirs stores a result, after an import,
in migration 0016 and ``draftbench rederive``); :func:`read` answers pages and the API: what is stored, or, for
another minimum effect than the stored one, a judgement made there and then.
"""

import hashlib
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import NamedTuple

from sqlalchemy import Select, String, cast, delete, func, select, text
from sqlalchemy.orm import Session

from app import db
from app.analysis.alarms import MIN_EFFECT, Difference, decide, difference
from app.analysis.intervals import wilson_interval
from app.cells import service as cells_service
from app.cells.identity import Identity
from app.cells.pooling import PooledCell
from app.cells.scope import CellScope
from app.enums import AlarmKind, CheckOutcome, CheckReason
from app.models import AlarmCheck, Job, Result, StoredAlarm, Sweep


@dataclass(frozen=True)
class Side:
    """One cell of an alarm's pair as the alarm read it: its proportion is ``successes / trials`` (accepted of
    draft tokens, or outputs equal to the baseline's), over the results of ``job_ids``."""

    backend: str
    graph_mode: str
    resolved_graph_modes: tuple[str, ...]
    successes: int
    trials: int
    draft_tokens: int
    job_ids: tuple[int, ...]
    sweep_ids: tuple[int, ...]

    @property
    def value(self) -> float:
        return self.successes / self.trials

    @property
    def interval(self) -> tuple[float, float, float]:
        """The proportion with Wilson's 95 % interval."""
        return (self.value, *wilson_interval(self.successes, self.trials))


@dataclass(frozen=True)
class Alarm:
    kind: AlarmKind
    build: str
    gpu_kind: str
    method: str
    variant: str
    label: str
    cell: Side
    sibling: Side  # the eager one
    difference: Difference  # the cell's proportion minus its sibling's

    @property
    def backend(self) -> str:
        return self.cell.backend

    @property
    def graph_mode(self) -> str:
        return self.cell.graph_mode

    @property
    def key(self) -> tuple[str, Identity]:
        """The flagged cell's ``PooledCell.key``."""
        return (self.build, Identity(self.gpu_kind, self.cell.backend, self.cell.graph_mode, self.variant))

    @property
    def sweep_ids(self) -> tuple[int, ...]:
        """The sweeps whose results either side pooled."""
        return tuple(sorted({*self.cell.sweep_ids, *self.sibling.sweep_ids}))

    @property
    def sentence(self) -> str:
        what = "acceptance" if self.kind is AlarmKind.ACCEPTANCE else "lossless share"
        d = self.difference
        return (f"{self.cell.backend} {self.cell.graph_mode} ({self.label}, {self.build}): {what} "
                f"{self.cell.value:.3f} against {self.sibling.value:.3f} eager on {self.sibling.backend}, "
                f"{d.value * 100:+.1f} points [{d.low * 100:+.1f}, {d.high * 100:+.1f}]")


@dataclass(frozen=True)
class Check:
    """One graphed cell with drafts, what the alarm made of it, and what decided that: the difference of the measure
    nearest to raising it (``kind``: acceptance, or a lossless share that dropped) with its interval, at
    ``min_effect``. An unpaired cell has none; a check stored before migration 0028 neither (its reason unknown)."""

    build: str
    gpu_kind: str
    backend: str
    graph_mode: str
    method: str
    variant: str
    label: str
    outcome: CheckOutcome
    sweep_ids: tuple[int, ...]  # the cell's and its eager sibling's
    sweep_names: tuple[str, ...]
    vllm_versions: tuple[str, ...]  # what the cell's results ran
    gpu_names: tuple[str, ...]
    ran_at: datetime | None  # when its newest result finished
    kind: AlarmKind | None = None
    difference: Difference | None = None  # the cell's proportion minus its eager sibling's
    min_effect: float | None = None

    @property
    def reason(self) -> CheckReason | None:
        """Why the alarm was raised or not (``app.analysis.alarms.decide``); None for an unpaired cell."""
        return None if self.outcome == CheckOutcome.UNPAIRED else _reason(self.difference, self.min_effect)

    @property
    def sentence(self) -> str:
        head = f"{self.backend} {self.graph_mode} ({self.label}, {self.build})"
        reason, d = self.reason, self.difference
        if reason is None:
            return f"{head}: no eager (NONE) sibling ran to compare it with"
        if reason is CheckReason.UNKNOWN:
            return f"{head}: {_SAID[reason]}"
        what = "acceptance" if self.kind is AlarmKind.ACCEPTANCE else "lossless share"
        return (f"{head}: {_SAID[reason]}: {what} {d.value * 100:+.1f} points [{d.low * 100:+.1f}, {d.high * 100:+.1f}] "
                f"against its eager sibling, minimum effect {self.min_effect * 100:g} points")


def _reason(moved: Difference | None, min_effect: float | None) -> CheckReason:
    """A paired check's reason: unknown where it kept no difference (stored before migration 0028)."""
    return CheckReason.UNKNOWN if moved is None or min_effect is None else decide(moved, min_effect)


# What each reason says of a cell (``Check.sentence``), beside its numbers.
_SAID = {
    CheckReason.RAISED: "alarmed (the interval excludes 0, the difference is at least the minimum effect)",
    CheckReason.BELOW_MIN_EFFECT: "below the minimum effect (the interval excludes 0, the difference is smaller)",
    CheckReason.WITHIN_INTERVAL: "within the interval (it includes 0)",
    CheckReason.UNKNOWN: "judged before a check kept what decided it (migration 0028): within the interval or below the "
                         "minimum effect, not told apart until the build's next result or `draftbench rederive` judges it again",
}


@dataclass(frozen=True)
class Judgement:
    """The alarm over some cells: its alarms, worst drop first, and every graphed cell with drafts it looked at
    (``checks``), or only how many came to each outcome and why the cells within were not flagged (``counts`` and
    ``reasons``; ``checks`` empty: ``read(..., checks=False)``)."""

    alarms: list[Alarm]
    checks: list[Check]
    counts: Mapping[str, int] = None  # type: ignore[assignment]  # outcome -> cells; counted from ``checks`` unless given
    reasons: Mapping[str, int] = None  # type: ignore[assignment]  # reason -> cells within; likewise

    def __post_init__(self) -> None:
        if self.counts is None:
            object.__setattr__(self, "counts", Counter(c.outcome for c in self.checks))
        if self.reasons is None:
            object.__setattr__(self, "reasons", Counter(c.reason for c in self.checks if c.outcome == CheckOutcome.WITHIN))

    def count(self, outcome: CheckOutcome | str) -> int:
        return self.counts.get(outcome, 0)

    def count_reason(self, reason: CheckReason | str) -> int:
        """Of the cells within (not flagged, able to show a bug), those ``reason`` spared."""
        return self.reasons.get(reason, 0)

    @property
    def spared(self) -> list[Check]:
        """The checks of cells within, nearest to raising the alarm first: below the minimum effect, unknown, within
        the interval; the largest difference first."""
        within = [c for c in self.checks if c.outcome == CheckOutcome.WITHIN]
        return sorted(within, key=lambda c: (_SPARED_ORDER.index(c.reason), -abs(c.difference.value) if c.difference else 0))

    @property
    def looked_at(self) -> int:
        """Graphed cells with drafts, whatever became of them."""
        return sum(self.counts.values())

    @property
    def judged(self) -> int:
        """Graphed cells compared with an eager sibling: alarmed, within (not flagged), or unable to show a bug."""
        return self.looked_at - self.count(CheckOutcome.UNPAIRED)


def judge(cells: list[PooledCell], *, min_effect: float = MIN_EFFECT) -> Judgement:
    """Every alarm among ``cells`` and what became of each graphed cell with drafts (``CheckOutcome``), with what
    decided it (``Check.reason``).

    Acceptance is flagged in either direction (a rise means the eager sibling is the broken one); the lossless
    share only when it drops. A cell that is not flagged and whose acceptance is exactly 0 or 1
    (``PooledCell.degenerate``) cannot show a bug: it is counted so, never as within its interval. Eager cells and
    cells without drafts are not looked at; a graphed cell without an eager sibling in ``cells`` is unpaired. A
    check keeps the measure nearest to raising the alarm (raised, then below the minimum effect, then within the
    interval), acceptance on a tie: a cell within is below the minimum effect when either measure is.
    """
    eager: dict[tuple, list[PooledCell]] = {}
    for cell in cells:
        if cell.graph_mode == "NONE" and cell.draft_tokens:
            eager.setdefault((cell.build, cell.gpu_kind, cell.variant), []).append(cell)
    found: list[Alarm] = []
    checks: list[Check] = []
    for cell in cells:
        if cell.graph_mode == "NONE" or cell.method is None or not cell.draft_tokens:
            continue
        siblings = eager.get((cell.build, cell.gpu_kind, cell.variant))
        if not siblings:
            checks.append(_check(cell, None, CheckOutcome.UNPAIRED))
            continue
        sibling = next((s for s in siblings if s.backend == cell.backend), siblings[0])
        measured = _measured(cell, sibling)
        mine = [_alarm(kind, cell, sibling, d) for kind, d in measured if decide(d, min_effect) is CheckReason.RAISED]
        kind, moved = min(measured, key=lambda m: _NEAREST_FIRST.index(decide(m[1], min_effect)))
        outcome = CheckOutcome.ALARM if mine else CheckOutcome.CANNOT_SHOW if cell.degenerate else CheckOutcome.WITHIN
        checks.append(_check(cell, sibling, outcome, kind, moved, min_effect))
        found += mine
    return Judgement(sorted(found, key=lambda a: a.difference.value), checks)


# Reasons by how near each came to raising the alarm: a check keeps its nearest measure's.
_NEAREST_FIRST = (CheckReason.RAISED, CheckReason.BELOW_MIN_EFFECT, CheckReason.WITHIN_INTERVAL)
# The cells within as ``Judgement.spared`` lists them: a reader looks first at those that came near.
_SPARED_ORDER = (CheckReason.BELOW_MIN_EFFECT, CheckReason.UNKNOWN, CheckReason.WITHIN_INTERVAL)


def _measured(cell: PooledCell, sibling: PooledCell) -> list[tuple[AlarmKind, Difference]]:
    """The differences the alarm reads of ``cell`` against its eager ``sibling``: acceptance, then the lossless share
    when both have one and it dropped (a rise is no sign of a capture bug)."""
    found = [(AlarmKind.ACCEPTANCE, difference(cell.accepted, cell.draft_tokens, sibling.accepted, sibling.draft_tokens))]
    if cell.lossless_total and sibling.lossless_total:
        lost = difference(cell.lossless_same, cell.lossless_total, sibling.lossless_same, sibling.lossless_total)
        if lost.value < 0:
            found.append((AlarmKind.LOSSLESS, lost))
    return found


def _side(kind: AlarmKind, cell: PooledCell) -> Side:
    counts = (cell.accepted, cell.draft_tokens) if kind is AlarmKind.ACCEPTANCE else (cell.lossless_same, cell.lossless_total)
    return Side(cell.backend, cell.graph_mode, tuple(sorted(cell.resolved_graph_modes)), *counts, cell.draft_tokens,
                tuple(sorted(cell.measured_in)), tuple(sorted(set(cell.measured_in.values()))))


def _alarm(kind: AlarmKind, cell: PooledCell, sibling: PooledCell, moved: Difference) -> Alarm:
    return Alarm(kind, cell.build, cell.gpu_kind, cell.method or "", cell.variant.measured, cell.label,
                 _side(kind, cell), _side(kind, sibling), moved)


def _check(cell: PooledCell, sibling: PooledCell | None, outcome: CheckOutcome, kind: AlarmKind | None = None,
           moved: Difference | None = None, min_effect: float | None = None) -> Check:
    names = {}
    for one in (cell, sibling) if sibling else (cell,):
        named = dict(zip(one.sweep_ids, one.sweep_names, strict=True))
        names.update({s: named[s] for s in one.measured_in.values()})
    sweeps = sorted(names)
    return Check(cell.build, cell.gpu_kind, cell.backend, cell.graph_mode, cell.method or "", cell.variant.measured,
                 cell.label, outcome, tuple(sweeps), tuple(names[s] for s in sweeps), tuple(sorted(cell.vllm_versions)),
                 tuple(sorted(cell.gpu_names)), cell.ran_at, kind, moved, min_effect)


def by_cell(found: list[Alarm]) -> dict[tuple, list[Alarm]]:
    """The alarms of each flagged cell, by its key (``PooledCell.key``)."""
    mine: dict[tuple, list[Alarm]] = {}
    for alarm in found:
        mine.setdefault(alarm.key, []).append(alarm)
    return mine


def difference_fields(moved: Difference | None) -> dict[str, float | None]:
    """A check's difference as its stored columns and the API's fields, null where it has none."""
    value, low, high = (moved.value, moved.low, moved.high) if moved else (None, None, None)
    return {"difference": value, "difference_low": low, "difference_high": high}


def refresh(*, session: Session, build: str, gpu_kind: str) -> None:
    """Judge every cell of ``build`` on ``gpu_kind`` (all their results, every sweep pooled) and store it in place of
    what was stored for them. Writes in ``session`` without committing: a result and the judgement that counts it
    commit together."""
    session.flush()  # the cells are read on the session's connection, which sees only what was flushed
    _lock(session, build, gpu_kind)
    judgement = judge(cells_service.load(session=session, scope=CellScope(build=build, gpu_kind=gpu_kind)))
    for model in (AlarmCheck, StoredAlarm):
        session.execute(delete(model).where(model.build == build, model.gpu_kind == gpu_kind))
    session.add_all([_check_row(c) for c in judgement.checks] + [_alarm_row(a) for a in judgement.alarms])
    session.flush()


def refresh_all(*, session: Session) -> None:
    """:func:`refresh` of every build and GPU kind with a result, what was stored for others dropped."""
    for model in (AlarmCheck, StoredAlarm):
        session.execute(delete(model))
    pairs = session.execute(select(Job.build, Job.gpu_kind).join(Result, Result.job_id == Job.id).distinct()).all()
    for build, gpu_kind in sorted(pairs):
        refresh(session=session, build=build, gpu_kind=gpu_kind)


def _lock(session: Session, build: str, gpu_kind: str) -> None:
    """On PostgreSQL, hold this build and GPU kind's lock to the end of the transaction: two results stored at once
    are judged one after the other, the second reading the first (each statement under READ COMMITTED reads what
    committed before it). SQLite takes its one writer's lock at BEGIN (``app.db``)."""
    if session.get_bind().dialect.name == "postgresql":
        digest = hashlib.sha256(f"draftbench alarms {build} {gpu_kind}".encode()).digest()
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": int.from_bytes(digest[:8], "big", signed=True)})


def read(*, session: Session, scope: CellScope, min_effect: float = MIN_EFFECT, checks: bool = True) -> Judgement:
    """The alarm over the cells in ``scope``, judged within their whole build and GPU kind (every sweep of the
    build pooled; a sweep's are those whose results it ran, on either side).

    With the stored minimum effect it is what is stored: a few rows per build, whatever the results. With another,
    the cells of the scope's builds are read and judged now (every build's when the scope names none). With
    ``checks=False``, for a reader of the alarms and the counts alone, the stored checks are counted in the database,
    not read (but for a sweep's, which are picked by the sweeps each read), those within by reason from their numbers.
    """
    if min_effect == MIN_EFFECT:
        if not checks and scope.sweep_id is None:
            return Judgement(_stored_alarms(session, scope), [], *_stored_counts(session, scope))
        return _within(Judgement(_stored_alarms(session, scope), _stored_checks(session, scope)), scope)
    builds = scope.builds
    if scope.sweep_id is not None:
        builds = tuple(session.scalars(select(Sweep.build).where(Sweep.id == scope.sweep_id)))
    cells = cells_service.load(session=session, scope=CellScope(build=scope.build, builds=builds, gpu_kind=scope.gpu_kind))
    return _within(judge(cells, min_effect=min_effect), scope)


def _where(stmt: Select, model: type[AlarmCheck] | type[StoredAlarm], scope: CellScope) -> Select:
    for column, value in ((model.build, scope.build), (model.gpu_kind, scope.gpu_kind), (model.method, scope.method),
                          (model.backend, scope.backend), (model.graph_mode, scope.graph_mode)):
        if value is not None:
            stmt = stmt.where(column == value)
    if scope.builds is not None:
        stmt = stmt.where(model.build.in_(scope.builds))
    if scope.sweep_id is not None:
        stmt = stmt.where(model.build.in_(select(Sweep.build).where(Sweep.id == scope.sweep_id)))
    return stmt


# The columns a check and an alarm are made of. Read as plain tuples (``app.db.plain``), not ORM objects: /alarms
# reads every stored check (4,050 at 100,000 results), 260-290 ms of CPU as objects and 115-175 so (on a loaded
# host).
# A check's lists come as their JSON text, decoded once per distinct text (``_listed``): the checks of a build share
# theirs, and decoding 16,000 of them was most of /alarms' time.
_CHECK = (AlarmCheck.build, AlarmCheck.gpu_kind, AlarmCheck.backend, AlarmCheck.graph_mode, AlarmCheck.method,
          AlarmCheck.variant, AlarmCheck.label, AlarmCheck.outcome,
          *(cast(c, String).label(c.key) for c in (AlarmCheck.sweep_ids, AlarmCheck.sweep_names, AlarmCheck.vllm_versions,
                                                   AlarmCheck.gpu_names)),
          AlarmCheck.ran_at, AlarmCheck.kind, AlarmCheck.difference, AlarmCheck.difference_low, AlarmCheck.difference_high,
          AlarmCheck.min_effect)
_ALARM = tuple(c for c in StoredAlarm.__table__.columns if c.name not in ("id", "computed_at"))


def _stored_alarms(session: Session, scope: CellScope) -> list[Alarm]:
    rows = db.plain(session.connection().execute(_where(select(*_ALARM), StoredAlarm, scope).order_by(StoredAlarm.id)))
    return sorted(map(_from_alarm_row, rows), key=lambda a: a.difference.value)


def _stored_checks(session: Session, scope: CellScope) -> list[Check]:
    rows = db.plain(session.connection().execute(_where(select(*_CHECK), AlarmCheck, scope).order_by(AlarmCheck.id)))
    return [Check(r.build, r.gpu_kind, r.backend, r.graph_mode, r.method, r.variant, r.label, r.outcome, _listed(r.sweep_ids),
                  _listed(r.sweep_names), _listed(r.vllm_versions), _listed(r.gpu_names), r.ran_at, r.kind,
                  _difference(r.difference, r.difference_low, r.difference_high), r.min_effect) for r in rows]


def _stored_counts(session: Session, scope: CellScope) -> tuple[Counter, Counter]:
    """The stored checks in ``scope`` counted by outcome in the database, and those within by reason from their
    differences alone (``Judgement.counts``, ``Judgement.reasons``)."""
    outcomes = _where(select(AlarmCheck.outcome, func.count()), AlarmCheck, scope).group_by(AlarmCheck.outcome)
    # Plain tuples of the four numbers: 2,700 checks within took 17 ms to count as named rows with their kind, 8 so.
    within = _where(select(AlarmCheck.difference, AlarmCheck.difference_low, AlarmCheck.difference_high, AlarmCheck.min_effect),
                    AlarmCheck, scope).where(AlarmCheck.outcome == CheckOutcome.WITHIN)
    return (Counter(dict(session.execute(outcomes).all())),
            Counter(_reason(_difference(value, low, high), min_effect)
                    for value, low, high, min_effect in session.connection().execute(within)))


def _difference(value: float | None, low: float | None, high: float | None) -> Difference | None:
    """A stored check's difference; None where it kept none."""
    return None if value is None else Difference(value, low, high)


@lru_cache(maxsize=4096)
def _listed(text: str) -> tuple:
    """A stored JSON list as a tuple (shared, so never changed)."""
    return tuple(json.loads(text))


def _within(judgement: Judgement, scope: CellScope) -> Judgement:
    """The alarms and checks of ``judgement`` in ``scope``; a sweep's are those whose either side it ran."""

    def keeps(item: Alarm | Check) -> bool:
        for mine, wanted in ((item.build, scope.build), (item.gpu_kind, scope.gpu_kind), (item.method, scope.method),
                             (item.backend, scope.backend), (item.graph_mode, scope.graph_mode)):
            if wanted is not None and mine != wanted:
                return False
        if scope.builds is not None and item.build not in scope.builds:
            return False
        return scope.sweep_id is None or scope.sweep_id in item.sweep_ids

    return Judgement([a for a in judgement.alarms if keeps(a)], [c for c in judgement.checks if keeps(c)])


def _check_row(check: Check) -> AlarmCheck:
    return AlarmCheck(build=check.build, gpu_kind=check.gpu_kind, backend=check.backend, graph_mode=check.graph_mode,
                      method=check.method, variant=check.variant, label=check.label, outcome=check.outcome,
                      sweep_ids=list(check.sweep_ids), sweep_names=list(check.sweep_names),
                      vllm_versions=list(check.vllm_versions), gpu_names=list(check.gpu_names), ran_at=check.ran_at,
                      kind=check.kind, min_effect=check.min_effect, **difference_fields(check.difference))



def _alarm_row(alarm: Alarm) -> StoredAlarm:
    cell, eager, d = alarm.cell, alarm.sibling, alarm.difference
    return StoredAlarm(
        kind=alarm.kind, build=alarm.build, gpu_kind=alarm.gpu_kind, method=alarm.method, variant=alarm.variant,
        label=alarm.label, backend=cell.backend, graph_mode=cell.graph_mode, resolved_graph_modes=list(cell.resolved_graph_modes),
        successes=cell.successes, trials=cell.trials, draft_tokens=cell.draft_tokens, job_ids=list(cell.job_ids),
        sweep_ids=list(cell.sweep_ids), eager_backend=eager.backend, eager_resolved_graph_modes=list(eager.resolved_graph_modes),
        eager_successes=eager.successes, eager_trials=eager.trials, eager_draft_tokens=eager.draft_tokens,
        eager_job_ids=list(eager.job_ids), eager_sweep_ids=list(eager.sweep_ids), difference=d.value,
        difference_low=d.low, difference_high=d.high,
    )


def _from_alarm_row(row: NamedTuple) -> Alarm:
    cell = Side(row.backend, row.graph_mode, tuple(row.resolved_graph_modes), row.successes, row.trials, row.draft_tokens,
                tuple(row.job_ids), tuple(row.sweep_ids))
    eager = Side(row.eager_backend, "NONE", tuple(row.eager_resolved_graph_modes), row.eager_successes, row.eager_trials,
                 row.eager_draft_tokens, tuple(row.eager_job_ids), tuple(row.eager_sweep_ids))
    return Alarm(row.kind, row.build, row.gpu_kind, row.method, row.variant, row.label, cell, eager,
                 Difference(row.difference, row.difference_low, row.difference_high))
