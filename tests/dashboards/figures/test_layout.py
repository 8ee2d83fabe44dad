"""Every figure holds all it draws: nothing is cropped to fit any more (``dashboards.figures.to_svg``), so each lays
itself out, and its ``<img>`` box is its own size. Drawn with the longest labels the pages make, as matplotlib lays
them out (Agg, which sets glyphs a little wider than their advances)."""

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from app.analysis.fallback import RepeatSpeed, pool_repeats
from app.cells.calibration import positions
from app.cells.identity import Variant
from app.cells.pooling import PooledCell
from app.enums import JobState
from dashboards.data import cells_frame
from dashboards.figures import Drawing, text_inches
from dashboards.figures.bars import speed_bars
from dashboards.figures.calibration import calibration
from dashboards.figures.heatmap import KEY, METRICS, heatmap, key_text
from dashboards.figures.history import history
from dashboards.figures.serving import COLUMNS, serving_figure
from dashboards.figures.throughput import throughput_by_cell

LONG = "draft_model k=3 draft=draft-noise-0.03 rejection_sample_method=synthetic"
BACKENDS = ["FLASHINFER", "FLASH_ATTN", "TRITON_ATTN"]
MODES = ["NONE", "PIECEWISE", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]


def _cell(backend: str, mode: str, speed: float, *, downgraded: bool = False) -> PooledCell:
    cell = PooledCell("vllm-0.24.9", "H200", backend, mode, "draft_model", Variant("v", "b", "v", LONG), LONG,
                      sweep_ids=[1], sweep_names=["s"], job_ids=[1], states=Counter({JobState.SUCCEEDED: 1}))
    cell.repeats.append(RepeatSpeed(speed, speed * 0.9, speed * 1.1, 5))
    cell.speed = pool_repeats(cell.repeats)
    cell.drafts, cell.draft_tokens, cell.accepted = 100, 300, 200
    cell.downgraded = downgraded
    cell.resolved_graph_modes = {"PIECEWISE" if downgraded else mode}
    return cell


def _frame(modes: list[str] = MODES, speed: float = 123_456.0) -> pd.DataFrame:
    return cells_frame([_cell(b, m, speed * (1 + i / 10), downgraded=b == "FLASHINFER" and m.startswith("FULL"))
                        for i, (b, m) in enumerate((b, m) for b in BACKENDS for m in modes)])


def _history() -> Drawing:
    series = []
    for i in range(9):
        series.append((f"H200 {LONG} FLASHINFER mode-{i}", pd.DataFrame({
            "when": pd.to_datetime(["2026-11-30T09:00Z", "2026-12-01T09:00Z"]), "placed_by": ["run"] * 2,
            "acceptance": [0.6, 0.61], "acceptance_low": [0.59, 0.6], "acceptance_high": [0.61, 0.62],
            "tokens_per_s": [5352.0, 5400.0], "tokens_per_s_low": [5000.0, 5100.0], "tokens_per_s_high": [5600.0, 5700.0],
            "acceptance_change": [False, True], "speed_change": [False, False]})))
    return history(series)


def _serving() -> Drawing:
    rows = []
    for series, speculative in ((f"{LONG} (h200-serving-8b-shape)", True), ("baseline (h200-serving-8b-shape)", False)):
        for clients in (1, 4, 16, 64):
            row = {"series": series, "speculative": speculative, "concurrency": clients, "starts": 3}
            for column in COLUMNS:
                value = 0.25 if column == "failed_share" else 1.3 if column == "speedup" else 1234.5 * clients
                row |= {column: value, f"{column}_low": value * 0.9, f"{column}_high": value * 1.1}
            rows.append(row)
    return serving_figure(pd.DataFrame(rows), f"H200 · FLASHINFER · FULL_AND_PIECEWISE · vllm-0.24.9 · {LONG}")


DRAWINGS = {
    "fallback bars": lambda: speed_bars(_frame(), f"H200 · {LONG} · vllm-0.24.9: tokens/s by backend / graph mode"),
    "sweep chart": lambda: throughput_by_cell(_frame()),
    **{f"heatmap of {metric}": (lambda metric=metric: heatmap(_frame(), metric, f"H200 · {LONG} · vllm-0.24.9"))
       for metric in METRICS},
    "heatmap of one mode": lambda: heatmap(_frame(MODES[:1], speed=0.5), "acceptance", f"H200 · {LONG} · vllm-0.24.9"),
    "calibration": lambda: calibration(positions([0.8, 0.5, 0.3], [99, 50, 2], 100), LONG),
    "history": _history,
    "serving": _serving,
}


@pytest.mark.parametrize("name", list(DRAWINGS))
def test_every_figure_holds_what_it_draws_in_the_box_its_image_reserves(name: str) -> None:
    drawing = DRAWINGS[name]()
    fig = drawing.figure(*drawing.args)
    fig.draw_without_rendering()
    held = fig.get_tightbbox(FigureCanvasAgg(fig).get_renderer())
    width, height = fig.get_size_inches()
    assert (width, height) == pytest.approx(drawing.size)
    # A hundredth of an inch: a pixel at 100 dpi.
    assert held.x0 >= -0.01 and held.y0 >= -0.01 and held.x1 <= width + 0.01 and held.y1 <= height + 0.01, (held, width, height)


def test_the_heatmaps_key_breaks_between_its_entries_only_where_the_squares_are_narrower_than_it() -> None:
    assert key_text(100.0) == " · ".join(KEY)
    narrow = key_text(2.9)  # one graph mode: 1.9 inches of square and 1 of colour bar
    assert narrow.split("\n") == [" · ".join(KEY[:4]), KEY[4]]
    assert all(text_inches([line], 7) <= 2.9 for line in narrow.split("\n"))
    # A one-mode panel is as wide as its labels, squares and bar, not as its key: three sit side by side in a 1400 px
    # window (less the page's 8 px margins, with /matrix's 24 px between panels).
    one = heatmap(_frame(MODES[:1], speed=0.5), "acceptance", "H100 · draft_model k=2 c=16 · vllm-0.26.0")
    assert 3 * one.width + 2 * 24 <= 1400 - 2 * 8, one.width


def test_text_inches_measures_the_widest_line_as_matplotlib_sets_it() -> None:
    # DejaVu Sans: "W" is 0.989 em, "i" 0.278 em; at 72 points an em is an inch; 5 % of slack.
    assert text_inches(["W", "i\nWW"], 72) == pytest.approx(2 * 0.98877 * 1.05, rel=1e-3)
    assert text_inches([], 10) == 0.0


def test_figures_drawn_at_once_on_several_threads_all_write_their_texts_as_text() -> None:
    # The service draws a page's images on its threads at once: a font setting made and undone around each drawing
    # (matplotlib's rc_context) once left some of them writing glyph outlines.
    # (The old setting left about one drawing in 40 outlined: 24 at once caught it in about half the runs.)
    drawings = [speed_bars(_frame(speed=1000.0 + i), f"H200 · {LONG} · b{i}") for i in range(24)]
    with ThreadPoolExecutor(8) as pool:
        svgs = list(pool.map(Drawing.svg, drawings))
    assert all("<text" in svg and "<!--" not in svg for svg in svgs)
