"""``/api/v1/parallel``: each tensor-parallel cell beside its one-GPU twin, acceptance tested and tokens/s compared
(``app.cells.parallel``), the numbers of ``/matrix``'s section of them."""

from fastapi import APIRouter

from app.api.responses import answers
from app.api.scopes import RecentScope
from app.cells import parallel
from app.cells import service as cell_service
from app.schemas.parallel import ParallelOut
from app.sessions import SessionDep

router = APIRouter(prefix="/api/v1", tags=["results"])


@router.get("/parallel", response_model=list[ParallelOut], responses=answers(422))
def read_parallel(session: SessionDep, scope: RecentScope) -> list[ParallelOut]:
    """The twins among the cells in scope (the newest sweeps' builds when neither a sweep nor a build is named)."""
    return [out(twin) for twin in parallel.twins(cell_service.load(session=session, scope=scope))]


def out(twin: parallel.Twin) -> ParallelOut:
    cell, one, a, s = twin.cell, twin.one_gpu, twin.acceptance, twin.speed
    return ParallelOut(
        gpu_kind=cell.gpu_kind, backend=cell.backend, graph_mode=cell.graph_mode, build=cell.build, label=cell.label,
        tensor_parallel_size=twin.sizes[0], draft_tensor_parallel_size=twin.sizes[1],
        acceptance=a and a.head_rate, one_gpu_acceptance=a and a.base_rate, acceptance_difference=a and a.difference,
        acceptance_difference_low=a and a.low, acceptance_difference_high=a and a.high, acceptance_p_value=a and a.p_value,
        acceptance_differs=a and a.flagged, speed_ratio=s and s.value, speed_ratio_low=s and s.low,
        speed_ratio_high=s and s.high, starts=len(cell.repeats), one_gpu_starts=len(one.repeats), jobs=cell.job_ids,
        one_gpu_jobs=one.job_ids, sentence=parallel.sentence(twin),
    )
