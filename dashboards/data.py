"""Service data as pandas DataFrames: the one place dashboards read the database."""

import pandas as pd
from sqlalchemy.orm import Session

from app.sweeps import service as sweeps

CELL_KEYS = ["gpu_kind", "backend", "graph_mode", "method"]


def sweep_cells(*, session: Session, sweep_id: int) -> pd.DataFrame:
    """One row per job of the sweep: its state and, where it ran, what it measured and what ran."""
    return pd.DataFrame([c.model_dump(mode="json") for c in sweeps.cells(session=session, sweep_id=sweep_id)])


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
