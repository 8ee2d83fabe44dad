"""The cells a read of pooled cells names (``/api/v1/speedups``, ``/api/v1/parallel``): a sweep, a build, or by
default the newest sweeps' builds, as the pages read them; and the matrix filters."""

from typing import Annotated

from fastapi import Depends, Query

from app.cells import service as cell_service
from app.cells.scope import CellScope
from app.enums import AttentionBackend, GpuKind, GraphMode, SpecMethod
from app.schemas.ids import Id
from app.sessions import SessionDep


def recent_scope(
    session: SessionDep,
    sweep_id: Annotated[Id | None, Query()] = None,
    build: Annotated[str | None, Query(max_length=128)] = None,
    gpu_kind: GpuKind | None = None,
    method: SpecMethod | None = None,
    backend: Annotated[AttentionBackend | None, Query(description="The backend requested")] = None,
    graph_mode: Annotated[GraphMode | None, Query(description="The graph mode requested")] = None,
) -> CellScope:
    """The scope of the query; the newest sweeps' builds when neither a sweep nor a build is named."""
    builds = None if build or sweep_id is not None else cell_service.recent_builds(session=session)
    return CellScope(sweep_id=sweep_id, build=build, builds=builds, gpu_kind=gpu_kind and gpu_kind.value,
                     method=method and method.value, backend=backend and backend.value,
                     graph_mode=graph_mode and graph_mode.value)


RecentScope = Annotated[CellScope, Depends(recent_scope)]
