"""``/api/v1/speedups``: each method's speedup against load per k, the best k, break-even and the counters' prediction
(``app.cells.best_k``), the numbers of ``/serving``."""

from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Query

from app.api.responses import answers
from app.api.scopes import RecentScope
from app.cells import best_k
from app.cells import service as cell_service
from app.enums import Mode
from app.schemas.speedup import BestKOut, BreakEvenOut, SpeedupCellOut, SpeedupLineOut
from app.sessions import SessionDep

router = APIRouter(prefix="/api/v1", tags=["results"])


@router.get("/speedups", response_model=list[SpeedupLineOut], responses=answers(422))
def read_speedups(
    session: SessionDep,
    scope: RecentScope,
    mode: Annotated[Mode, Query(description="serve: against clients; offline: against batch size")] = Mode.SERVE,
) -> list[SpeedupLineOut]:
    """The lines of the cells in scope (the newest sweeps' builds when neither a sweep nor a build is named), read
    with their baselines whatever ``method`` names."""
    cells = cell_service.load(session=session, scope=replace(scope, method=None, mode=mode.value))
    return [out(line) for line in best_k.lines(cells, mode.value) if scope.method is None or line.method == scope.method]


def out(line: best_k.Line) -> SpeedupLineOut:
    cells = []
    for m in line.cells:
        s, p = m.speedup, m.prediction
        cells.append(SpeedupCellOut(
            k=m.k, load=m.load, label=m.cell.label, speedup=s and s.value, speedup_low=s and s.low, speedup_high=s and s.high,
            acceptance_length=m.tau, predicted_speedup=p and p.predicted, off_prediction=bool(p and p.off),
            scheduler_differs=m.scheduler_differs,
            starts=len(m.cell.repeats), baseline_starts=len(m.baseline.repeats) if m.baseline else 0, jobs=m.cell.job_ids,
            baseline_jobs=m.baseline.job_ids if m.baseline else [],
        ))
    best = [BestKOut(load=at, k=b.k, speedup=b.speedup.value, speedup_low=b.speedup.low, speedup_high=b.speedup.high,
                     within_noise=list(b.within_noise), measured=b.measured, sentence=best_k.best_sentence(b, at, line.mode))
            for at, b in sorted(line.best.items())]
    ends = [BreakEvenOut(k=k, pays=e.pays, load=e.x, low=e.low, high=e.high, why=e.why,
                         sentence=best_k.break_even_sentence(line, k)) for k, e in sorted(line.break_even.items())]
    return SpeedupLineOut(title=line.title, build=line.build, gpu_kind=line.gpu_kind, method=line.method, name=line.name,
                          backend=line.backend, resolved_graph_mode=line.resolved_graph_mode, mode=line.mode, ks=line.ks,
                          loads=line.loads, cells=cells, best=best, break_even=ends, one_k=list(line.one_k),
                          scheduler=best_k.scheduler_sentence(line), counting=best_k.counting_sentence(line))
