"""``/api/v1/results``: measured cells with filters, as JSON or CSV."""

import csv
import io
import json
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response

from app.deps import SessionDep
from app.enums import AttentionBackend, GpuKind, GraphMode, SpecMethod
from app.results import service
from app.schemas.result import ResultOut

router = APIRouter(prefix="/api/v1/results", tags=["results"])


def _filter(
    sweep_id: int | None = None,
    build: str | None = None,
    backend: AttentionBackend | None = None,
    graph_mode: GraphMode | None = None,
    method: SpecMethod | None = None,
    gpu_kind: GpuKind | None = None,
) -> service.ResultFilter:
    return service.ResultFilter(
        sweep_id=sweep_id,
        build=build,
        backend=backend and backend.value,
        graph_mode=graph_mode and graph_mode.value,
        method=method and method.value,
        gpu_kind=gpu_kind and gpu_kind.value,
    )


FilterDep = Annotated[service.ResultFilter, Depends(_filter)]
Limit = Annotated[int, Query(ge=1, le=10_000)]
Offset = Annotated[int, Query(ge=0)]


@router.get("", response_model=list[ResultOut])
def list_results(session: SessionDep, where: FilterDep, limit: Limit = 1000, offset: Offset = 0) -> list[ResultOut]:
    """Results filtered by sweep, build, backend, graph mode, method and GPU kind."""
    return service.query_out(session=session, where=where, limit=limit, offset=offset)


@router.get(".csv", response_class=Response, responses={200: {"content": {"text/csv": {}}}})
def export_csv(session: SessionDep, where: FilterDep, limit: Limit = 10_000, offset: Offset = 0) -> Response:
    """The same rows as ``GET /api/v1/results``, one CSV line each (lists as JSON text)."""
    rows = service.query_out(session=session, where=where, limit=limit, offset=offset)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(ResultOut.model_fields))
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, list) else v for k, v in row.model_dump(mode="json").items()})
    return Response(
        buffer.getvalue(),
        media_type="text/csv",
        headers={"Content-Disposition": 'attachment; filename="draftbench-results.csv"'},
    )
