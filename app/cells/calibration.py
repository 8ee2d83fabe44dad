"""Calibration cells: pooled cells that asked vLLM for synthetic acceptance at known per-position rates
(``rejection_sample_method: synthetic``), each position's measured rate held against the rate asked for.

A miss is a position whose measured interval excludes the rate asked for: the engine does not accept at that rate,
or its counters are off. The judgement is ``app.analysis.acceptance.calibration_misses``, the one that sets each
stored result's ``calibration_miss``, here over the pooled counts of the cell's engine starts.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.analysis.acceptance import calibration_misses, per_position
from app.cells import service as cells
from app.cells.pooling import PooledCell
from app.cells.scope import CellScope
from app.models import Job, Result


@dataclass(frozen=True)
class Position:
    """One draft position (``number`` from 1): the rate asked for, the measured ``A_i / D`` with its Wilson 95 %
    interval, the counts behind it, and whether the interval misses the rate asked for. ``expected``, ``measured``
    and ``accepted`` are None where the cell asked for or measured fewer positions (a miss)."""

    number: int
    expected: float | None
    measured: tuple[float, float, float] | None
    accepted: int | None
    drafts: int
    miss: bool


@dataclass(frozen=True)
class CalibrationCell:
    """A pooled calibration cell: ``label`` tells it apart from every other cell of the page; ``starts`` results
    pooled (engine starts), with ``rounds`` measured rounds in all; ``starts_missed`` of them missed on their own
    counts (their stored ``calibration_miss``; a start that reported no counters measured nothing, a miss)."""

    cell: PooledCell
    label: str
    expected: tuple[float, ...]
    positions: tuple[Position, ...]
    starts: int
    rounds: int
    starts_missed: int

    @property
    def missed(self) -> tuple[int, ...]:
        """The numbers of the positions that miss."""
        return tuple(p.number for p in self.positions if p.miss)

    @property
    def miss(self) -> bool:
        return bool(self.missed)


def positions(expected: Sequence[float], accepted_per_position: Sequence[int], drafts: int) -> tuple[Position, ...]:
    """Each position ``i`` of a cell with ``D`` drafts: ``A_i / D`` with Wilson's interval (``per_position``), and a
    miss where that interval excludes ``expected[i]`` or either side lacks the position (``calibration_misses``).
    Without drafts every position asked for is a miss."""
    measured = per_position(accepted_per_position, drafts)
    return tuple(
        Position(i + 1, expected[i] if i < len(expected) else None, measured[i] if i < len(measured) else None,
                 accepted_per_position[i] if i < len(accepted_per_position) else None, drafts, miss)
        for i, miss in enumerate(calibration_misses(expected, measured))
    )


def load(*, session: Session, scope: CellScope) -> list[CalibrationCell]:
    """The calibration cells in ``scope``, pooled as every page pools (``app.cells.service.load``), each with the
    rates its results asked for (a cell's jobs share its config, so its first job's rates are its own). One query
    besides the pooling's, and the cells are chosen in SQL."""
    scope = replace(scope, calibration=True)
    found = cells.load(session=session, scope=scope)
    stored = {
        row.job_id: row for row in session.execute(scope.apply(
            select(Result.job_id, Result.expected_per_position, Result.calibration_miss, Result.rounds)
            .join(Job, Job.id == Result.job_id)))
    }
    asked = {c.key: tuple(float(rate) for rate in stored[c.job_ids[0]].expected_per_position) for c in found}
    labels = _labels(found, asked)
    out = []
    for cell in found:
        rows = [stored[j] for j in cell.job_ids]
        out.append(CalibrationCell(
            cell, labels[cell.key], asked[cell.key], positions(asked[cell.key], cell.accepted_per_position, cell.drafts),
            starts=len(rows), rounds=sum(r.rounds for r in rows), starts_missed=sum(r.calibration_miss is not False for r in rows),
        ))
    return out


# How the label names the rates where they tell configs apart: said again, and better, after it.
_RATES = re.compile(r" synthetic_acceptance_rates=\[[^\]]*\]")


def _labels(found: list[PooledCell], asked: dict[tuple, tuple[float, ...]]) -> dict[tuple, str]:
    """GPU, backend, graph mode, the cell's label (``app.cells.identity.labels``: none shared among the cells read
    together) less the rates asked for, which follow it as ``asked 0.8/0.5/0.3``, and the build."""
    return {c.key: f"{c.gpu_kind} · {c.backend} · {c.graph_mode} · {_RATES.sub('', c.label)} · asked "
                   f"{'/'.join(f'{rate:g}' for rate in asked[c.key]) or 'no rates'} · {c.build}"
            for c in found}
