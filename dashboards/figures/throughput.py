"""A sweep's median tokens/s per cell as horizontal bars."""

from functools import lru_cache

import pandas as pd
from matplotlib.figure import Figure

from dashboards.figures import to_svg


def throughput_by_cell(table: pd.DataFrame) -> str | None:
    """Horizontal bars of median tokens/s per cell, labelled with acceptance; None when nothing ran.

    Drawing costs most of a sweep page's time, so a chart is drawn once per distinct content.
    """
    ran = table.dropna(subset=["tokens_per_s"])
    if ran.empty:
        return None
    bars = tuple(
        (
            " / ".join(str(row[k]) for k in ("gpu_kind", "backend", "graph_mode", "method")),
            float(row["tokens_per_s"]),
            None if pd.isna(row["acceptance_rate"]) else float(row["acceptance_rate"]),
            bool(row["downgraded"]),
        )
        for _, row in ran.iterrows()
    )
    return _throughput_svg(bars)


@lru_cache(maxsize=256)
def _throughput_svg(cells: tuple[tuple[str, float, float | None, bool], ...]) -> str:
    labels, speeds, rates, downgraded = zip(*cells, strict=True)
    # Figure without pyplot: no global state, so pages render safely on the server's threads.
    fig = Figure(figsize=(8, 0.4 * len(cells) + 1.2))
    ax = fig.subplots()
    bars = ax.barh(labels, speeds, color=["#c44e52" if d else "#4c72b0" for d in downgraded])
    for bar, rate in zip(bars, rates, strict=True):
        if rate is not None:
            ax.annotate(f"acc {rate:.2f}", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                        xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("output tokens/s (median over repeats); red: graph mode downgraded")
    ax.set_title("Throughput per cell")
    return to_svg(fig)
