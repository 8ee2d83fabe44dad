"""``/api/v1/results`` (measured jobs, as JSON or CSV) and the worker's reports that make them: log and complete."""

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.responses import Response, StreamingResponse

from app import spreadsheets
from app.api.deps import ExistingJob, HeldJob
from app.api.responses import answers
from app.cells.scope import CellScope
from app.crashes import service as crashes
from app.enums import AttentionBackend, GpuKind, GraphMode, SpecMethod
from app.metrics.service import MetricsDep
from app.results import calibration, service
from app.schemas.ids import Id
from app.schemas.result import CalibrationMisses, ResultOut
from app.schemas.worker import CompleteRequest, JobOut
from app.sessions import SessionDep

router = APIRouter(prefix="/api/v1", tags=["results"])


def _filter(
    sweep_id: Annotated[Id | None, Query()] = None,
    build: str | None = None,
    gpu_kind: GpuKind | None = None,
    method: SpecMethod | None = None,
    backend: Annotated[AttentionBackend | None, Query(description="The backend the cell requested")] = None,
    graph_mode: Annotated[GraphMode | None, Query(description="The graph mode the cell requested")] = None,
    resolved_backend: Annotated[AttentionBackend | None, Query(description="The backend that ran")] = None,
    resolved_graph_mode: Annotated[GraphMode | None, Query(description="The graph mode that ran")] = None,
    graph_downgraded: Annotated[bool | None, Query(description="vLLM ran another graph mode than requested")] = None,
    draft_eager: Annotated[bool | None, Query(description="The draft ran without CUDA graphs")] = None,
) -> service.ResultFilter:
    return service.ResultFilter(
        CellScope(sweep_id=sweep_id, build=build, gpu_kind=gpu_kind and gpu_kind.value, method=method and method.value,
                  backend=backend and backend.value, graph_mode=graph_mode and graph_mode.value),
        resolved_backend=resolved_backend and resolved_backend.value,
        resolved_graph_mode=resolved_graph_mode and resolved_graph_mode.value,
        graph_downgraded=graph_downgraded,
        draft_eager=draft_eager,
    )


FilterDep = Annotated[service.ResultFilter, Depends(_filter)]
Limit = Annotated[int, Query(ge=1, le=10_000)]
Offset = Annotated[int, Query(ge=0, le=2**62)]


@router.get("/results", response_model=list[ResultOut], responses=answers(422))
def list_results(session: SessionDep, where: FilterDep, limit: Limit = 1000, offset: Offset = 0) -> list[ResultOut]:
    """Results filtered by sweep, build, GPU kind, method, requested and resolved backend and graph mode, in the order
    they were stored (by id), not newest first: a page at an offset stays the same while new results are added."""
    return service.query_out(session=session, where=where, limit=limit, offset=offset)


@router.get("/results.csv", response_class=Response, responses={200: {"content": {"text/csv": {}}}, **answers(422)})
def export_csv(session: SessionDep, where: FilterDep, limit: Limit = 10_000, offset: Offset = 0) -> Response:
    """The same rows as ``GET /api/v1/results``, one CSV line each (lists as JSON text).

    Text that a spreadsheet would run as a formula is neutralised (``app.spreadsheets``).
    """
    rows = service.query_out(session=session, where=where, limit=limit, offset=offset)
    columns = list(ResultOut.model_fields)
    dumped = (row.model_dump(mode="json") for row in rows)
    return spreadsheets.csv_response(columns, ([d[k] for k in columns] for d in dumped), name="results")


@router.get("/calibration-misses", response_model=CalibrationMisses, responses=answers(422))
def list_calibration_misses(
    session: SessionDep,
    sweep_id: Annotated[Id | None, Query()] = None,
    limit: Annotated[int, Query(ge=0, le=1000)] = calibration.SHOWN,
) -> CalibrationMisses:
    """Calibration results (synthetic acceptance at known per-position rates) whose measured interval misses a rate
    asked for, over every stored result (or one sweep's), newest first (by when the cell ended, ``app.newest``);
    ``count`` counts them all. With 95 %
    intervals about one position in twenty misses by chance."""
    found = calibration.misses(session=session, sweep_id=sweep_id, limit=limit)
    return CalibrationMisses(count=found.count, misses=found.shown)


@router.get(
    "/jobs/{job_id}/log",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, **answers(404, 422)},
)
def download_log(job: ExistingJob, session: SessionDep) -> StreamingResponse:
    """The cell's full log, as the worker uploaded it, streamed as it is decompressed."""
    compressed = crashes.compressed_log(session=session, job_id=job.id)
    if compressed is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job.id} has no log")
    return StreamingResponse(crashes.log_chunks(compressed), media_type="text/plain; charset=utf-8")


async def _body_text(request: Request) -> str:
    return (await request.body()).decode(errors="replace")


@router.put(
    "/jobs/{job_id}/log",
    status_code=status.HTTP_204_NO_CONTENT,
    openapi_extra={"requestBody": {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    responses=answers(401, 403, 404, 409, 413, 422, 429),
)
def upload_log(job: HeldJob, text: Annotated[str, Depends(_body_text)], session: SessionDep) -> None:
    """Store the cell's full log (compressed); only the worker holding the job may write it."""
    crashes.store_log(session=session, job_id=job.id, text=text)


@router.post("/jobs/{job_id}/complete", response_model=JobOut, responses=answers(401, 403, 404, 409, 413, 422, 429))
def complete(job: HeldJob, body: CompleteRequest, session: SessionDep, metrics: MetricsDep) -> JobOut:
    """Report a finished cell: its result, or how it died. 409 when the worker no longer holds the job
    (cancelled, or its lease lapsed and the job went back to the queue): the newer attempt stands."""
    service.record(session=session, job=job, outcome=body.outcome)
    metrics.completed(job)
    return JobOut.model_validate(job)
