"""A sweep's tokens/s per cell as horizontal bars, each with its 95 % interval."""

from functools import lru_cache

import pandas as pd
from matplotlib.figure import Figure

from dashboards.figures import Drawing, drawable, to_svg, whiskers

NAN = float("nan")
Bar = tuple[str, float, float | None, float | None, float | None, bool]


def throughput_by_cell(frame: pd.DataFrame) -> Drawing | None:
    """Horizontal bars of tokens/s per cell (``dashboards.data.cells_frame``: repeats pooled) with their interval
    as error bars, labelled with acceptance; None when nothing ran.

    Drawing costs most of a sweep page's time, so a chart is drawn once per distinct content, and only for its SVG.
    """
    bars = tuple(
        (
            " / ".join(str(row[k]) for k in ("gpu_kind", "backend", "graph_mode", "method")),
            speed,
            drawable(row["tokens_per_s_low"]),
            drawable(row["tokens_per_s_high"]),
            drawable(row["acceptance"]),
            bool(row["downgraded"]),
        )
        for _, row in frame.iterrows()
        if (speed := drawable(row["tokens_per_s"])) is not None
    )
    if not bars:
        return None
    return Drawing(_throughput_svg, (bars,), f"Throughput per cell: tokens/s of {len(bars)} cells with 95 % intervals, "
                   f"{sum(b[5] for b in bars)} with the graph mode downgraded (red)", _size(len(bars)))


def _size(cells: int) -> tuple[float, float]:
    return (8, 0.4 * cells + 1.2)


@lru_cache(maxsize=256)
def _throughput_svg(cells: tuple[Bar, ...]) -> str:
    labels, speeds, lows, highs, rates, downgraded = zip(*cells, strict=True)
    # Figure without pyplot: no global state, so pages render safely on the server's threads.
    fig = Figure(figsize=_size(len(cells)))
    ax = fig.subplots()
    # A cell without an interval (one round of one start) gets no error bar (NaN draws none).
    # Rows by position, not by name: two bars of one name would be drawn into one row.
    bars = ax.barh(range(len(cells)), speeds, xerr=whiskers(speeds, lows, highs, missing=NAN), capsize=3,
                   error_kw={"elinewidth": 1}, color=["#c44e52" if d else "#4c72b0" for d in downgraded])
    ax.set_yticks(range(len(cells)), labels)
    for bar, rate, high, speed in zip(bars, rates, highs, speeds, strict=True):
        if rate is not None:
            ax.annotate(f"acc {rate:.2f}", (high if high is not None else speed, bar.get_y() + bar.get_height() / 2),
                        xytext=(6, 0), textcoords="offset points", va="center", fontsize=8)
    # Room right of the longest bar's interval for its acceptance label.
    ax.set_xlim(0, max([*speeds, *(high for high in highs if high is not None)]) * 1.18)
    ax.invert_yaxis()
    ax.set_xlabel("output tokens/s, repeats pooled, with its 95 % interval; red: graph mode downgraded")
    ax.set_title("Throughput per cell")
    return to_svg(fig)
