"""Tokens/s of one GPU x method group as horizontal bars with their intervals, fallbacks in red."""

from functools import lru_cache

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from dashboards.figures import Drawing, drawable, to_svg, whiskers

FALLBACK, HONOURED = "#c44e52", "#4c72b0"


def speed_bars(frame: pd.DataFrame, title: str) -> Drawing | None:
    """One bar per backend x graph mode requested (``frame``: ``cells_frame`` rows of one group); None when
    nothing ran. Whiskers: the 95 % interval of the pooled median (none without one)."""
    bars = tuple(
        (f"{r.backend} / {r.graph_mode}" + (f" -> {r.resolved_graph_mode}" if r.downgraded else ""),
         speed, drawable(r.tokens_per_s_low), drawable(r.tokens_per_s_high),
         bool(r.downgraded or (r.draft_eager and r.graph_mode != "NONE")))
        for r in frame.sort_values(["backend", "graph_mode"]).itertuples()
        if (speed := drawable(r.tokens_per_s)) is not None
    )
    if not bars:
        return None
    fallbacks = sum(b[4] for b in bars)
    return Drawing(_draw, (bars, title), f"{title}: {len(bars)} bars of tokens/s with 95 % intervals, {fallbacks} of them "
                   "downgraded or draft eager (red)", _size(len(bars)))


def _size(bars: int) -> tuple[float, float]:
    return (8, 0.38 * bars + 1.4)


@lru_cache(maxsize=512)
def _draw(bars: tuple[tuple[str, float, float | None, float | None, bool], ...], title: str) -> str:
    labels, speeds, lows, highs, fallback = zip(*bars, strict=True)
    fig = Figure(figsize=_size(len(bars)))
    ax = fig.subplots()
    # Rows by position, not by name: two bars of one name would be drawn into one row.
    ax.barh(range(len(bars)), speeds, xerr=whiskers(speeds, lows, highs), capsize=3,
            color=[FALLBACK if f else HONOURED for f in fallback])
    ax.set_yticks(range(len(bars)), labels)
    for y, (s, lo) in enumerate(zip(speeds, lows, strict=True)):
        ax.annotate(f"{s:,.0f}" + ("" if lo is not None else " (no interval)"), (s, y), xytext=(4, -9),
                    textcoords="offset points", fontsize=7, color="#333")
    ax.invert_yaxis()
    ax.set_xlabel("output tokens/s: median over repeats, whiskers 95 % interval")
    ax.set_title(title, fontsize=10)
    ax.legend(handles=[Patch(color=HONOURED, label="ran as requested"),
                       Patch(color=FALLBACK, label="downgraded or draft eager")],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    return to_svg(fig)
