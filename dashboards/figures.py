"""DataFrames to inline SVG charts with matplotlib (no display needed)."""

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def _svg(fig) -> str:  # noqa: ANN001
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]


def throughput_by_cell(table: pd.DataFrame) -> str | None:
    """Horizontal bars of median tokens/s per cell, labelled with acceptance; None when nothing ran."""
    ran = table.dropna(subset=["tokens_per_s"])
    if ran.empty:
        return None
    labels = [" / ".join(str(row[k]) for k in ("gpu_kind", "backend", "graph_mode", "method")) for _, row in ran.iterrows()]
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(ran) + 1.2))
    bars = ax.barh(labels, ran["tokens_per_s"], color=["#c44e52" if d else "#4c72b0" for d in ran["downgraded"]])
    for bar, rate in zip(bars, ran["acceptance_rate"], strict=True):
        if pd.notna(rate):
            ax.annotate(f"acc {rate:.2f}", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                        xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("output tokens/s (median over repeats); red: graph mode downgraded")
    ax.set_title("Throughput per cell")
    return _svg(fig)
