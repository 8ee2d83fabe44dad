"""Calibration misses over every stored result: cells that asked vLLM for known per-position acceptance rates
(synthetic rejection sampling) whose measured interval at some position misses the rate asked for
(``Result.calibration_miss``, set when the result is stored; ``app.analysis.acceptance.calibration_misses``)."""

from dataclasses import dataclass

from sqlalchemy import func, select, true
from sqlalchemy.orm import Session

from app.analysis.acceptance import calibration_misses, per_position
from app.models import Job, Result

# The misses a page or ``draftbench status`` lists; the count is of all of them.
SHOWN = 20


@dataclass(frozen=True)
class Position:
    """A draft position (1 = the first draft token) that missed: the rate asked for, and the measured rate with its
    95 % Wilson interval over the cell's drafts (None where the cell measured no such position)."""

    number: int
    expected: float | None
    measured: tuple[float, float, float] | None

    @property
    def text(self) -> str:
        asked = "nothing" if self.expected is None else f"{self.expected:.3f}"
        if self.measured is None:
            return f"position {self.number} not measured (asked {asked})"
        rate, low, high = self.measured
        return f"position {self.number} measured {rate:.3f} [{low:.3f}, {high:.3f}] against {asked} asked"


@dataclass(frozen=True)
class Miss:
    job_id: int
    sweep_id: int
    build: str
    gpu_kind: str
    backend: str
    graph_mode: str
    method: str | None
    drafts: int
    positions: tuple[Position, ...]

    @property
    def sentence(self) -> str:
        where = f"job {self.job_id} (sweep {self.sweep_id}, {self.build}, {self.gpu_kind} {self.backend} {self.graph_mode}, {self.method})"
        return f"{where}: {'; '.join(p.text for p in self.positions)} ({self.drafts} drafts)"


@dataclass(frozen=True)
class Misses:
    count: int  # every stored miss in scope
    shown: list[Miss]  # the newest of them, at most SHOWN


def misses(*, session: Session, sweep_id: int | None = None, limit: int = SHOWN) -> Misses:
    """The stored results in ``sweep_id`` (default: all) whose calibration missed, newest first: two queries on
    ``ix_results_calibration_miss``, whatever the number of results."""
    # `= true`, not `IS true`: the index serves an equality.
    where = [Result.calibration_miss == true()] + ([Job.sweep_id == sweep_id] if sweep_id is not None else [])
    count = session.scalar(select(func.count()).select_from(Result).join(Job, Job.id == Result.job_id).where(*where)) or 0
    rows = session.execute(
        select(Result.job_id, Result.expected_per_position, Result.accepted_per_position, Result.num_drafts, Job.sweep_id,
               Job.build, Job.gpu_kind, Job.backend, Job.graph_mode, Job.method)
        .join(Job, Job.id == Result.job_id).where(*where).order_by(Result.id.desc()).limit(limit)
    ).all()
    return Misses(count, [_miss(row) for row in rows])


def _miss(row) -> Miss:
    expected = row.expected_per_position or []
    measured = per_position(row.accepted_per_position or [], row.num_drafts)
    missed = calibration_misses(expected, measured)
    positions = tuple(
        Position(i + 1, expected[i] if i < len(expected) else None, measured[i] if i < len(measured) else None)
        for i, miss in enumerate(missed) if miss
    )
    return Miss(row.job_id, row.sweep_id, row.build, row.gpu_kind, row.backend, row.graph_mode, row.method, row.num_drafts,
                positions)
