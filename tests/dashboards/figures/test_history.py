"""The history figure as a reader sees it: plain tick labels, an axis around the points' own dates, the legend whole."""

import re
from datetime import UTC, datetime

import pandas as pd

from dashboards.figures import Drawing
from dashboards.figures.history import history
from tests.dashboards.shown import texts

WHEN = datetime(2026, 11, 30, 15, 57, tzinfo=UTC)


def _series(label: str, acceptance: float, when: datetime = WHEN) -> tuple[str, pd.DataFrame]:
    return label, pd.DataFrame({
        "when": [when], "placed_by": ["run"], "acceptance": [acceptance], "acceptance_low": [acceptance],
        "acceptance_high": [acceptance], "tokens_per_s": [5352.0], "tokens_per_s_low": [3456.0],
        "tokens_per_s_high": [8288.0], "acceptance_change": [False], "speed_change": [False]})


def _texts(svg: str | Drawing) -> list[str]:
    return texts(svg.svg() if isinstance(svg, Drawing) else svg)


def test_one_point_of_acceptance_1_reads_without_offset_notation_in_its_own_hours() -> None:
    texts = _texts(history([_series("H200 draft_model k=3 TRITON_ATTN FULL_DECODE_ONLY", 1.0)]))
    # Matplotlib's offset would write "1e-5+9.999e-1" over ticks 6...10; the axis is at least 0.1 of a rate tall.
    assert not [t for t in texts if "e-" in t or "e−" in t or "+" in t], texts
    assert {"0.96", "1.00", "1.04"} <= set(texts)
    # Hours either side of the one date, not years: no tick names another year or a day more than one away.
    assert not [t for t in texts if re.fullmatch(r"20\d\d", t)], texts
    days = {t for t in texts if re.fullmatch(r"(Nov|Dec)-\d\d", t)}
    assert days <= {"Nov-30", "Dec-01"}, texts


def test_the_legend_names_every_series_drawn() -> None:
    series = [_series(f"H200 draft_model k=3 FLASHINFER mode-{i}", 1.0 - i / 100) for i in range(8)]
    svg = history(series).svg()
    legend = svg[svg.index('<g id="legend_1">'):]
    assert [t for t in _texts(legend) if t.startswith("H200")] == [label for label, _ in series]
