"""Calibration misses over every stored result: cells that asked vLLM for known per-position acceptance rates
(synthetic rejection sampling) whose measured interval at some position misses the rate asked for
(``Result.calibration_miss``, set when the result is stored; ``app.analysis.acceptance.calibration_misses``)."""

from dataclasses import dataclass

from sqlalchemy import func, select, true
from sqlalchemy.orm import Session

from app import newest
from app.analysis.acceptance import calibration_misses, per_position
from app.models import Job, Result
from app.schemas.result import CalibrationMiss, MissedPosition

# The misses a page or ``draftbench status`` lists; the count is of all of them.
SHOWN = 20


@dataclass(frozen=True)
class Misses:
    count: int  # every stored miss in scope
    shown: list[CalibrationMiss]  # the newest of them, at most SHOWN


def misses(*, session: Session, sweep_id: int | None = None, limit: int = SHOWN) -> Misses:
    """The stored results in ``sweep_id`` (default: all) whose calibration missed, newest first (``app.newest.RESULTS``):
    two queries on ``ix_results_calibration_miss``, whatever the number of results; the second sorts every miss by its
    time (25 ms over 11,000 misses on either database), since an import's ids do not follow when its results ran."""
    # `= true`, not `IS true`: the index serves an equality.
    where = [Result.calibration_miss == true()] + ([Job.sweep_id == sweep_id] if sweep_id is not None else [])
    count = session.scalar(select(func.count()).select_from(Result).join(Job, Job.id == Result.job_id).where(*where)) or 0
    rows = session.execute(
        select(Result.job_id, Result.expected_per_position, Result.accepted_per_position, Result.num_drafts, Job.sweep_id,
               Job.build, Job.gpu_kind, Job.backend, Job.graph_mode, Job.method)
        .join(Job, Job.id == Result.job_id).where(*where).order_by(*newest.RESULTS).limit(limit)
    ).all()
    return Misses(count, [_miss(row) for row in rows])


def _miss(row) -> CalibrationMiss:
    expected = row.expected_per_position or []
    measured = per_position(row.accepted_per_position or [], row.num_drafts)
    missed = calibration_misses(expected, measured)
    positions = []
    for i, miss in enumerate(missed):
        if miss:
            rate, low, high = measured[i] if i < len(measured) else (None, None, None)
            positions.append(MissedPosition(number=i + 1, expected=expected[i] if i < len(expected) else None,
                                            measured=rate, measured_low=low, measured_high=high))
    where = f"job {row.job_id} (sweep {row.sweep_id}, {row.build}, {row.gpu_kind} {row.backend} {row.graph_mode}, {row.method})"
    return CalibrationMiss(job_id=row.job_id, sweep_id=row.sweep_id, build=row.build, gpu_kind=row.gpu_kind,
                           backend=row.backend, graph_mode=row.graph_mode, method=row.method, drafts=row.num_drafts,
                           positions=positions,
                           sentence=f"{where}: {'; '.join(_text(p) for p in positions)} ({row.num_drafts} drafts)")


def _text(position: MissedPosition) -> str:
    asked = "nothing" if position.expected is None else f"{position.expected:.3f}"
    if position.measured is None:
        return f"position {position.number} not measured (asked {asked})"
    return (f"position {position.number} measured {position.measured:.3f} [{position.measured_low:.3f}, "
            f"{position.measured_high:.3f}] against {asked} asked")
