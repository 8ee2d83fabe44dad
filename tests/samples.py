"""Results of one cell pooled as the service pools them: what the verdict tests and benchmarks judge.

Each result is stored as ``app.results.service.record`` stores it and pooled by ``app.cells.pooling``, so
these tests read the numbers the compare page and the CI verdict read.
"""

from collections.abc import Sequence

from app.analysis.verdicts import CellSample
from app.cells import identity, pooling
from app.cells.pooling import PooledCell
from app.models import Job, utcnow
from app.results import service as results
from app.schemas.cell import CellResult, Resolved


def pooled(found: Sequence[CellResult]) -> CellSample:
    """The verdicts' sample of ``found`` as the repeats of one cell. Raises ValueError without results."""
    if not found:
        raise ValueError("no results to pool")
    job = Job(spec={})
    cell = PooledCell("build", "gpu", "backend", "graph_mode", None, identity.variant(job.spec), "")
    for index, result in enumerate(found):
        pooling.add(cell, results.result_row(job, result, Resolved(), created_at=utcnow()), job_id=index)
    return pooling.sample(cell)
