"""Which cells a page, the alarm or a comparison reads: a filter on the jobs behind them."""

from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import ColumnElement, Select, String, cast, exists
from sqlalchemy.orm import aliased

from app.models import Job, Result


class Placed(Protocol):
    """A pooled cell's place: its build, matrix axes, method and the sweeps it pools."""

    build: str
    gpu_kind: str
    backend: str
    graph_mode: str
    method: str | None
    sweep_ids: list[int]


@dataclass(frozen=True)
class CellScope:
    """Which cells to read; every field None reads all (pages pass a build or a sweep)."""

    sweep_id: int | None = None
    build: str | None = None
    builds: tuple[str, ...] | None = None
    gpu_kind: str | None = None
    method: str | None = None
    backend: str | None = None
    graph_mode: str | None = None
    # Only calibration cells: jobs whose result stored the per-position rates it asked for (synthetic acceptance).
    # Their baselines are not read, so such cells have no speedup or lossless share.
    calibration: bool = False
    mode: str | None = None  # "offline" or "serve" (``app.enums.Mode``)

    def describe(self) -> str:
        """Where the cells come from, in words: ``sweep 3``, ``build vllm-0.26.0``..."""
        if self.sweep_id is not None:
            return f"sweep {self.sweep_id}"
        if self.build is not None:
            return f"build {self.build}"
        if self.builds is not None:
            return f"builds {', '.join(self.builds)} (the newest sweeps')" if self.builds else "no build yet"
        return "every build"

    def apply(self, stmt: Select) -> Select:
        for column, value in (
            (Job.sweep_id, self.sweep_id), (Job.build, self.build), (Job.gpu_kind, self.gpu_kind),
            (Job.method, self.method), (Job.backend, self.backend), (Job.graph_mode, self.graph_mode),
            (Job.mode, self.mode),
        ):
            if value is not None:
                stmt = stmt.where(column == value)
        if self.builds is not None:
            stmt = stmt.where(Job.build.in_(self.builds))
        if self.calibration:
            # Correlated, so a database looks up the result of each job in scope, never reads every result stored;
            # on an alias, since the statement may join the results itself.
            result = aliased(Result)
            stmt = stmt.where(exists().where(result.job_id == Job.id, _asked_rates(result)))
        return stmt


    def holds(self, cell: Placed) -> bool:
        """Whether a pooled cell read by a wider scope is one this scope reads: a cell is a sweep's when the sweep
        is among those it pools."""
        return all(value is None or value == getattr(cell, name) for name, value in (
            ("build", self.build), ("gpu_kind", self.gpu_kind), ("method", self.method), ("backend", self.backend),
            ("graph_mode", self.graph_mode),
        )) and (self.sweep_id is None or self.sweep_id in cell.sweep_ids) and (self.builds is None or cell.build in self.builds)


def _asked_rates(result: type[Result]) -> ColumnElement[bool]:
    """Results that stored the rates they asked for. The JSON column holds an ordinary cell's None as JSON ``null``
    (``IS NOT NULL`` matches every row), and rows from before migration 0006 as SQL NULL (which ``!=`` never matches)."""
    return cast(result.expected_per_position, String) != "null"

