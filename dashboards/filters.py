"""The query string every page reads its filters from, so a view is a shareable link.

Values are checked against ``app.enums``: a wrong one is a 422 naming the field and the allowed
values; a sweep that does not exist is a 404 naming it. An empty value (a form's "any") is no filter.
"""

from dataclasses import dataclass, replace
from typing import Annotated, Literal
from urllib.parse import urlencode

from fastapi import Depends, Query
from pydantic import BeforeValidator, Field
from sqlalchemy.orm import Session

from app.cells.scope import CellScope
from app.enums import AttentionBackend, GpuKind, GraphMode, SpecMethod
from app.schemas.ids import Id
from app.sessions import SessionDep
from app.sweeps import service as sweeps


def _blank_is_none(value: object) -> object:
    return None if value == "" else value


Blank = BeforeValidator(_blank_is_none)
# Bounds go on the inner type: a blank value becomes None before them, and None has no bounds to check.
SweepId = Annotated[Id | None, Blank, Query(description="A sweep's id")]
BuildLabel = Annotated[Annotated[str, Field(max_length=128)] | None, Blank, Query(description="A build label")]


@dataclass(frozen=True)
class Filters:
    sweep_id: int | None = None
    build: str | None = None
    gpu_kind: str | None = None
    method: str | None = None
    backend: str | None = None
    graph_mode: str | None = None

    def scope(self, *, default_builds: tuple[str, ...] | None) -> CellScope:
        """What to read: the filters, within ``default_builds`` (the recent sweeps' builds) when neither a sweep
        nor a build is named."""
        builds = None if self.build or self.sweep_id else default_builds
        return CellScope(sweep_id=self.sweep_id, build=self.build, builds=builds, gpu_kind=self.gpu_kind,
                         method=self.method, backend=self.backend, graph_mode=self.graph_mode)

    def link(self, path: str, **changes: object) -> str:
        """``path`` with these filters (and ``changes``) as its query string."""
        # ``vars``, not ``asdict`` (which copies each value deeply): a matrix of 432 cells makes a link per cell.
        values = {**vars(self), **changes}
        query = urlencode({k: v for k, v in values.items() if v not in (None, "")})
        return f"{path}?{query}" if query else path

    def with_(self, **changes: object) -> "Filters":
        return replace(self, **changes)


def existing(session: Session, *sweep_ids: int | None) -> None:
    """Raises ``NotFoundError`` (a 404 naming the sweep, as ``/sweeps/{id}`` answers) for a sweep id that no sweep has:
    a page of a sweep that does not exist says so, never that it has no cell."""
    for sweep_id in sweep_ids:
        if sweep_id is not None:
            sweeps.get(session=session, sweep_id=sweep_id)


def read_filters(
    session: SessionDep,
    sweep_id: SweepId = None,
    build: BuildLabel = None,
    gpu_kind: Annotated[GpuKind | None, Blank, Query()] = None,
    method: Annotated[SpecMethod | None, Blank, Query()] = None,
    backend: Annotated[AttentionBackend | None, Blank, Query(description="The backend requested")] = None,
    graph_mode: Annotated[GraphMode | None, Blank, Query(description="The graph mode requested")] = None,
) -> Filters:
    existing(session, sweep_id)
    return Filters(sweep_id, build, gpu_kind and gpu_kind.value, method and method.value,
                   backend and backend.value, graph_mode and graph_mode.value)


FiltersDep = Annotated[Filters, Depends(read_filters)]
Format = Annotated[Literal["html", "csv", "svg"], Blank,
                   Query(description="csv: the table behind the page's figures; svg: the figure named by figure")]
FigureNumber = Annotated[Annotated[int, Field(ge=1, le=10_000)] | None, Blank,
                         Query(description="With format=svg: which of the page's figures, from 1 in the page's order")]
