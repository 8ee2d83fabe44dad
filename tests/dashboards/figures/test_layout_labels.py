"""No two texts of a figure lie on each other, nor past its edges, with the many and long categories the pages
give them: every series of a best-k sweep at many client counts, a k of 64 positions, a dozen cells' long labels.
Drawn as matplotlib lays them out (Agg), each text's window extent against every other's."""

import itertools
from collections import Counter

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from app.analysis.fallback import RepeatSpeed, pool_repeats
from app.analysis.request_acceptance import RATE_BINS, RequestAcceptance
from app.cells.calibration import positions
from app.cells.identity import Variant
from app.cells.pooling import PooledCell
from app.enums import AttentionBackend, GraphMode, JobState
from dashboards.data import cells_frame
from dashboards.figures import Drawing
from dashboards.figures.bars import speed_bars
from dashboards.figures.calibration import calibration
from dashboards.figures.heatmap import heatmap
from dashboards.figures.history import history
from dashboards.figures.requests import request_rates
from dashboards.figures.serving import COLUMNS, serving_figure
from dashboards.figures.speedup import speedup_figures

LONG = "draft_model k=3 draft=draft-noise-0.03 rejection_sample_method=synthetic"
TITLE = f"H200 · {LONG} counting=empty streams failed (runner before cell schema 5) · FLASH_ATTN · FULL_AND_PIECEWISE"
# Clients a best-k sweep asks: half an octave apart above 16, where the labels of 96 and 128 touch.
CLIENTS = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256]


def _serving(clients: list[int]) -> Drawing:
    """A baseline and k = 1 to 4 at every count: no request failed (``0 %`` five times over at each), speedups a
    hundredth apart."""
    rows = []
    for k in range(5):
        for count in clients:
            row = {"series": f"draft_model k={k} c={count}" if k else f"baseline c={count}", "speculative": k > 0,
                   "concurrency": count, "starts": 3}
            for column in COLUMNS:
                value = 0.0 if column == "failed_share" else 1.3 + k / 100 if column == "speedup" else 12.5 * count
                row |= {column: value, f"{column}_low": value * 0.9, f"{column}_high": value * 1.1 + 0.02}
            rows.append(row)
    return serving_figure(pd.DataFrame(rows), "H200 · FLASHINFER · FULL_AND_PIECEWISE · vllm-0.26.0-slow-gpu-11.5ms")


def _speedup() -> Drawing:
    rows = [{"line_number": 1, "line": TITLE, "load_unit": "clients", "k": k, "load": load, "speedup": 1.5 - k / 20,
             "speedup_low": 1.4 - k / 20, "speedup_high": 1.6 - k / 20, "predicted_speedup": 1.55 - k / 20}
            for k in range(1, 9) for load in CLIENTS]
    return speedup_figures(pd.DataFrame(rows))[1]


def _cell(backend: str, mode: str, label: str, speed: float) -> PooledCell:
    cell = PooledCell("vllm-0.26.0", "H200", backend, mode, "draft_model", Variant("v", "b", "v", label), label,
                      sweep_ids=[1], sweep_names=["s"], job_ids=[1], states=Counter({JobState.SUCCEEDED: 1}))
    cell.repeats.append(RepeatSpeed(speed, speed * 0.9, speed * 1.1, 5))
    cell.speed = pool_repeats(cell.repeats)
    cell.drafts, cell.draft_tokens, cell.accepted = 100, 300, 200
    cell.resolved_graph_modes = {mode}
    return cell


def _requests() -> Drawing:
    """Twelve cells (the most the figure draws), each titled by its long label, backend and graph mode."""
    cells = []
    for i in range(12):
        cell = _cell("FLASHINFER", "FULL_AND_PIECEWISE", f"{LONG} c={2 ** i} counting=empty streams completed", 5000.0)
        cell.requests = RequestAcceptance(rate_bins=[100 * i + 3000 * b for b in range(RATE_BINS)], no_drafts=i)
        cells.append(cell)
    return request_rates(cells)


def _heatmap() -> Drawing:
    cells = [_cell(backend.value, mode.value, LONG, 1000.0 + 37 * i) for i, (backend, mode) in
             enumerate(itertools.product(list(AttentionBackend)[:11], GraphMode))]
    return heatmap(cells_frame(cells), "tokens_per_s", f"H200 · {LONG} · vllm-0.26.0")


def _bars() -> Drawing:
    cells = [_cell(backend.value, mode.value, LONG, 1000.0 + 37 * i) for i, (backend, mode) in
             enumerate(itertools.product(list(AttentionBackend)[:12], GraphMode))]
    return speed_bars(cells_frame(cells), f"H200 · {LONG} · vllm-0.26.0: tokens/s by backend / graph mode")


def _history() -> Drawing:
    """Nine cells' series over 60 weekly builds."""
    when = pd.date_range("2025-01-06", periods=60, freq="7D", tz="UTC")
    frame = pd.DataFrame({"when": when, "placed_by": "commit", "acceptance": 0.6, "acceptance_low": 0.59,
                          "acceptance_high": 0.61, "tokens_per_s": [5352.0 + i for i in range(60)],
                          "tokens_per_s_low": 5000.0, "tokens_per_s_high": 5600.0, "acceptance_change": False,
                          "speed_change": False})
    return history([(f"H200 {LONG} {backend.value} FULL_AND_PIECEWISE", frame) for backend in list(AttentionBackend)[:9]])


def _calibration(k: int) -> Drawing:
    rates = [round(0.9 * 0.95 ** i, 3) for i in range(k)]
    return calibration(positions(rates, [int(1000 * r) for r in rates], 1000), LONG)


DRAWINGS = {
    "serving: five series at thirteen client counts": lambda: _serving(CLIENTS),
    "serving: five series at four client counts": lambda: _serving([1, 4, 16, 64]),
    "speedup: eight k and a title longer than the figure": _speedup,
    "request histograms: twelve long labels": _requests,
    "calibration: 64 positions": lambda: _calibration(64),
    "calibration: 17 positions": lambda: _calibration(17),
    "heatmap: eleven backends by five graph modes": _heatmap,
    "fallback bars: sixty labels": _bars,
    "history: nine series over sixty builds": _history,
}


@pytest.mark.parametrize("name", list(DRAWINGS))
def test_no_two_texts_of_a_figure_overlap_nor_leave_it(name: str) -> None:
    drawing = DRAWINGS[name]()
    fig = drawing.figure(*drawing.args)
    boxes = _extents(fig)
    width, height = fig.bbox.width, fig.bbox.height
    # A pixel at 100 dpi either way: the extents are Agg's, which sets glyphs a little wider than a browser does.
    touching = [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes.items(), 2) if _overlap(box_a, box_b) > 1]
    assert not touching, touching
    outside = [t for t, box in boxes.items() if box.x0 < -1 or box.y0 < -1 or box.x1 > width + 1 or box.y1 > height + 1]
    assert not outside, outside


def test_the_serving_figure_writes_every_series_value_where_there_is_room_and_the_table_has_the_rest() -> None:
    values = {len(clients): Counter(t.get_text() for t in _drawn(_serving(clients)) if t.get_text().endswith(("x", " %")))
              for clients in ([1, 4, 16, 64], CLIENTS)}
    # Four counts: each series' failed share and speedup at each (five 1.30x to 1.34x, five 0 %, stacked).
    assert values[4] == {"0 %": 20, **{f"{1.3 + k / 100:.2f}x": 4 for k in range(5)}}
    # Thirteen, half an octave apart above 16: a count whose values would run into the last written count's is left
    # out, its points still drawn.
    assert 5 < values[13]["0 %"] < 5 * 13 and values[13]["0 %"] == values[13]["1.30x"] * 5


def _extents(fig: Figure) -> dict[str, Bbox]:
    """Every text drawn, by its words and its place in the drawing order, and its window extent."""
    return {f"{i}: {text.get_text()!r}": text.get_window_extent() for i, text in enumerate(_texts(fig))}


def _drawn(drawing: Drawing) -> list[Text]:
    return _texts(drawing.figure(*drawing.args))


def _texts(fig: Figure) -> list[Text]:
    """The texts ``fig`` draws, once drawn: its axes' tick labels at ticks in view (matplotlib keeps, and skips, those
    past its limits), then every other text that says something: titles, axis labels, values written on it, legends."""
    FigureCanvasAgg(fig).draw()
    labels, shown = set(), []
    for axis in (axis for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)):
        low, high = sorted(axis.get_view_interval())
        for tick in axis.get_major_ticks() + axis.get_minor_ticks():
            labels |= {id(tick.label1), id(tick.label2)}
            if low - 1e-9 * abs(high - low) <= tick.get_loc() <= high + 1e-9 * abs(high - low):
                shown += [tick.label1, tick.label2]
    shown += [t for t in fig.findobj(Text) if id(t) not in labels]
    return [t for t in shown if t.get_visible() and t.get_text().strip()]


def _overlap(a: Bbox, b: Bbox) -> float:
    """The smaller of the widths and heights two boxes share (0 when apart)."""
    return max(0.0, min(min(a.x1, b.x1) - max(a.x0, b.x0), min(a.y1, b.y1) - max(a.y0, b.y0)))
