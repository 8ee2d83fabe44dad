"""Service data as pandas DataFrames: the one place dashboards read the database."""

import pandas as pd
from sqlalchemy.orm import Session

from app.results import service as results
from app.sweeps import service as sweeps

CELL_KEYS = ["gpu_kind", "backend", "graph_mode", "method"]


def sweep_cells(*, session: Session, sweep_id: int) -> pd.DataFrame:
    """One row per job of the sweep: its state and, where it ran, what it measured and what ran."""
    sweep = sweeps.get(session=session, sweep_id=sweep_id)
    jobs = pd.DataFrame([c.model_dump(mode="json") for c in sweeps.detail(session=session, sweep=sweep).cells])
    measured = pd.DataFrame(
        [r.model_dump(mode="json") for r in results.query_out(session=session, where=results.ResultFilter(sweep_id=sweep_id), limit=100_000, offset=0)]
    )
    if measured.empty:
        return jobs.assign(resolved_graph_mode=None, graph_downgraded=False, draft_eager=False, mean_acceptance_length=None)
    keep = ["job_id", "resolved_backend", "resolved_graph_mode", "graph_downgraded", "draft_eager",
            "mean_acceptance_length", "acceptance_rate_low", "acceptance_rate_high", "speedup"]
    return jobs.merge(measured[keep], on="job_id", how="left")


def matrix_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Repeats folded into one row per cell: median tokens/s and acceptance, states counted."""
    cells = cells.assign(method=cells["method"].fillna("baseline"))
    grouped = cells.groupby(CELL_KEYS, dropna=False, sort=True)
    table = grouped.agg(
        runs=("job_id", "count"),
        acceptance_rate=("acceptance_rate", "median"),
        tokens_per_s=("tokens_per_s", "median"),
        resolved_graph_mode=("resolved_graph_mode", lambda s: ", ".join(sorted({str(v) for v in s.dropna()}))),
        downgraded=("graph_downgraded", lambda s: bool(s.fillna(False).astype(bool).any())),
        draft_eager=("draft_eager", lambda s: bool(s.fillna(False).astype(bool).any())),
    )
    table["states"] = grouped["state"].agg(lambda s: ", ".join(f"{k} {v}" for k, v in s.value_counts().sort_index().items()))
    return table.reset_index()
