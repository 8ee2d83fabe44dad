"""Bisections: a series of builds, the steps run on it, and where it stands.

``draftbench bisect`` runs the sweeps; the service compares each step's sweep with the good build's and the bad
build's (``app.comparisons.service``, the ``/compare`` rule), keeps the rows as the step's evidence and calls the step by
``app.analysis.bisection``: the client never says what a step found. Where a bisection stands is derived from its
steps on every read, so the range, the next build and the state have one source.
"""

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from app import newest
from app.analysis import bisection as rule
from app.analysis.bisection import ACCEPTANCE, TOKENS_PER_S, Movement, Symptom
from app.analysis.verdicts import Change
from app.cells.scope import CellScope
from app.comparisons import service as comparisons
from app.enums import BisectionState, StepCall, SweepState
from app.errors import ConflictError, InputError, NotFoundError
from app.jobs import queue
from app.models import Bisection, BisectionStep, Build, Sweep
from app.schemas.bisection import Evidence
from app.schemas.compare import Interval
from app.sweeps import service as sweeps

# Which end of the range a step's evidence row compares the build with.
GOOD, BAD = "good", "bad"


@dataclass(frozen=True)
class Standing:
    """Where a bisection stands: its range's ends (labels), its state, the build to run next (None unless
    running), the steps left at most, and what the steps look for."""

    last_good: str
    first_bad: str
    state: BisectionState
    next_build: str | None
    steps_left: int
    symptoms: frozenset[Symptom]


def create(*, session: Session, name: str, series: list[str], good: str, bad: str, created_by: str) -> Bisection:
    """A new bisection of ``series`` (oldest first). InputError naming the field: a label twice, a label no worker
    registered (the registered ones listed), ``good`` or ``bad`` not in the series, or ``good`` not before ``bad``."""
    seen: set[str] = set()
    for i, label in enumerate(series):
        if label in seen:
            raise InputError(["series", i], f"build {label!r} comes twice: a series names each build once")
        seen.add(label)
    known = set(session.scalars(select(Build.label).where(Build.label.in_(series))))
    unknown = [(i, label) for i, label in enumerate(series) if label not in known]
    if unknown:
        i, label = unknown[0]
        registered = sorted(session.scalars(select(Build.label)))
        raise InputError(["series", i], f"build {label!r} is not registered (a worker's --build registers it)", registered)
    for field, label in (("good", good), ("bad", bad)):
        if label not in seen:
            raise InputError([field], f"build {label!r} is not in the series", series)
    if series.index(good) >= series.index(bad):
        raise InputError(["bad"], f"build {bad!r} comes before the good build {good!r} in the series, or is it: "
                                  "the series is oldest first and the bad build is a later one")
    found = Bisection(name=name, series=series, good=good, bad=bad, created_by=created_by)
    session.add(found)
    session.flush()
    return found


def get(*, session: Session, bisection_id: int, lock: bool = False) -> Bisection:
    stmt = select(Bisection).where(Bisection.id == bisection_id).options(selectinload(Bisection.steps))
    found = session.scalars(stmt.with_for_update(of=Bisection) if lock else stmt).one_or_none()
    if found is None:
        raise NotFoundError("bisection", bisection_id)
    return found


def recent(*, session: Session, limit: int) -> list[Bisection]:
    """The newest ``limit`` bisections (``app.newest.BISECTIONS``), each with its steps."""
    stmt = select(Bisection).options(selectinload(Bisection.steps)).order_by(*newest.BISECTIONS).limit(limit)
    return list(session.scalars(stmt))


def standing(found: Bisection) -> Standing:
    """The range, state and next build its steps give (``app.analysis.bisection.narrow``): the first step is the bad
    build against the good one, whose changes (its symptoms) each later step looks for; none: ``NO_CHANGE``."""
    position = {label: i for i, label in enumerate(found.series)}
    good, bad = position[found.good], position[found.bad]
    if not found.steps:
        return Standing(found.good, found.bad, BisectionState.RUNNING, found.bad, rule.steps_needed(good, bad) + 1, frozenset())
    first, *later = found.steps
    looked_for = rule.symptoms(movements(first.evidence))
    if not looked_for:
        return Standing(found.good, found.bad, BisectionState.NO_CHANGE, None, 0, looked_for)
    reached = rule.narrow(good, bad, [(s.position, s.call) for s in later])
    running = reached.state is BisectionState.RUNNING
    nxt = rule.midpoint(reached.good, reached.bad) if running else None
    return Standing(found.series[reached.good], found.series[reached.bad], reached.state,
                    found.series[nxt] if nxt is not None else None,
                    rule.steps_needed(reached.good, reached.bad) if running else 0, looked_for)


def add_step(*, session: Session, bisection_id: int, sweep_id: int, against_sweep_id: int) -> Bisection:
    """Call the next step: ``sweep_id`` (a finished sweep of the build the bisection runs next) against
    ``against_sweep_id`` (a finished sweep of its good build), the two compared cell by cell; after the first step,
    also against the first step's sweep of the bad build (``app.analysis.bisection.call`` reads both).

    Raises NotFoundError (the bisection or a sweep), ConflictError (the bisection has stopped, or a sweep has not
    finished), InputError naming the field (a sweep of another build, or sweeps that share no cell).
    """
    found = get(session=session, bisection_id=bisection_id, lock=True)
    now = standing(found)
    if now.next_build is None:
        raise ConflictError(f"bisection {found.id} is {now.state}: no step is left to run")
    head = _finished(session=session, sweep_id=sweep_id)
    base = _finished(session=session, sweep_id=against_sweep_id)
    if base.build != found.good:
        raise InputError(["against_sweep_id"], f"sweep {base.id} ran build {base.build!r}, not the good build {found.good!r}")
    if head.build != now.next_build:
        raise InputError(["sweep_id"], f"sweep {head.id} ran build {head.build!r}; the bisection runs {now.next_build!r} next")
    rows = _compared(session=session, base=base.id, head=head.id, against=GOOD)
    if not rows:
        raise InputError(["sweep_id"], f"sweep {head.id} shares no cell with sweep {base.id}: run the good build's cells")
    if (bad := bad_sweep(found)) is not None:
        bad_rows = _compared(session=session, base=bad, head=head.id, against=BAD)
        called = rule.call(now.symptoms, movements(rows), movements(bad_rows, BAD))
        rows += bad_rows
    else:
        called = StepCall.BAD if rule.symptoms(movements(rows)) else StepCall.GOOD
    found.steps.append(BisectionStep(position=found.series.index(head.build), build=head.build, sweep_id=head.id,
                                     against_sweep_id=base.id, call=called, evidence=rows))
    session.flush()
    return found


def bad_sweep(found: Bisection) -> int | None:
    """The sweep each later step's rows against the bad build were compared with: the first step's, the bad build's
    own run; None before the first step."""
    return found.steps[0].sweep_id if found.steps else None


def movements(evidence: list[dict], against: str = GOOD) -> list[Movement]:
    """The two calls, tokens/s and acceptance, of each stored evidence row against the ``against`` build."""
    return [Movement(row["cell"], metric, Change(row[f"{metric}_change"]) if row[f"{metric}_change"] else None)
            for row in evidence if row["against"] == against for metric in (TOKENS_PER_S, ACCEPTANCE)]


def _compared(*, session: Session, base: int, head: int, against: str) -> list[dict]:
    """The rows of sweep ``head`` against sweep ``base`` (``app.comparisons.service``), as a step keeps them."""
    _, _, changes = comparisons.between(session=session, base=CellScope(sweep_id=base), head=CellScope(sweep_id=head))
    return [evidence_of(c, against).model_dump(mode="json") for c in changes]


def evidence_of(change: comparisons.Change, against: str) -> Evidence:
    """A compared cell as a step keeps it: the verdict, each metric's call, the intervals and the starts each side."""
    head, numbers, moved = change.head, change.numbers, change.acceptance
    return Evidence(
        cell=cell_name(head.gpu_kind, head.label, head.backend, head.graph_mode), against=against, verdict=change.verdict,
        tokens_per_s_change=numbers.throughput.change if numbers else None,
        acceptance_change=numbers.acceptance_change if numbers else None,
        speed_ratio=Interval(value=change.speed.value, low=change.speed.low, high=change.speed.high) if change.speed else None,
        acceptance_difference=Interval(value=moved.difference, low=moved.low, high=moved.high) if moved else None,
        compared_starts=len(change.base.repeats), starts=len(head.repeats), reasons=list(change.reasons),
    )


def cell_name(gpu_kind: str, label: str, backend: str, graph_mode: str) -> str:
    return f"{gpu_kind} {label} {backend} {graph_mode}"


def _finished(*, session: Session, sweep_id: int) -> Sweep:
    sweep = sweeps.get(session=session, sweep_id=sweep_id)
    state = sweeps.state_of(sweep, queue.counts_by_state(session=session, sweep_id=sweep.id))
    if state is not SweepState.FINISHED:
        raise ConflictError(f"sweep {sweep.id} is {state}: a step is called on finished sweeps")
    return sweep
