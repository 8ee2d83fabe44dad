"""Every figure over cells in every job state and mixes of them, with each missing value held as pandas holds it and
as None, NaN and ``pd.NA``: each draws what ran, marks only what is so, and never writes a missing value as text."""

import re
from collections import Counter
from datetime import UTC, datetime

import pandas as pd
import pytest

from app.alarms import service as alarms
from app.analysis.fallback import RepeatSpeed, pool_repeats, ratio
from app.cells.identity import Variant
from app.cells.pooling import PooledCell
from app.enums import JobState
from dashboards.data import cells_frame
from dashboards.figures import Drawing
from dashboards.figures.bars import speed_bars
from dashboards.figures.heatmap import METRICS, heatmap, shared_scale
from dashboards.figures.history import history
from dashboards.figures.throughput import throughput_by_cell
from tests.dashboards.shown import texts

S = JobState
# One cell per state, then mixes: what a sweep's cells hold while it runs, after it, and once cancelled.
MIXES = [{S.QUEUED: 2}, {S.RUNNING: 1}, {S.SUCCEEDED: 2}, {S.CRASHED: 2}, {S.TIMED_OUT: 1}, {S.FAILED: 1},
         {S.CANCELLED: 2}, {S.CRASHED: 1, S.QUEUED: 1}, {S.SUCCEEDED: 1, S.CRASHED: 1}, {S.RUNNING: 1, S.TIMED_OUT: 1},
         {S.SUCCEEDED: 1, S.QUEUED: 1}, {S.FAILED: 1, S.CANCELLED: 1}, {S.SUCCEEDED: 1, S.RUNNING: 1, S.CANCELLED: 1},
         {S.CRASHED: 1, S.TIMED_OUT: 1, S.FAILED: 1}]
BACKENDS = ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"]
MODES = ["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]
MISSING_TEXT = re.compile(r"\b(nan|NaN|None|NaT)\b|<NA>")


def _cell(backend: str, mode: str, method: str | None, states: dict[JobState, int], accepted: int = 30) -> PooledCell:
    name = method or "baseline"
    cell = PooledCell("b1", "H200", backend, mode, method, Variant(method or "base", "base", method or "base", name), name,
                      sweep_ids=[1], sweep_names=["s"], job_ids=list(range(sum(states.values()))), states=Counter(states))
    if states.get(S.CRASHED) or states.get(S.TIMED_OUT):
        cell.crash_kinds = Counter({"out_of_memory" if states.get(S.CRASHED) else "timeout": 1})
        cell.crash_signature = "abc"
    for _ in range(states.get(S.SUCCEEDED, 0)):
        cell.repeats.append(RepeatSpeed(100.0, 97.0, 104.0, 5))
        cell.resolved_graph_modes.add(mode)
        cell.vllm_versions.add("0.32.0")
        cell.ran_at = datetime(2026, 11, 30, 9, tzinfo=UTC)
        if method:
            cell.drafts, cell.draft_tokens, cell.accepted = cell.drafts + 20, cell.draft_tokens + 60, cell.accepted + accepted
    if cell.repeats:
        cell.speed = pool_repeats(cell.repeats)
    return cell


def _frame() -> pd.DataFrame:
    """``_cells`` as a page frames them, with their alarms."""
    cells = _cells()
    return cells_frame(cells, alarms.by_cell(alarms.judge(cells).alarms))


def _cells() -> list[PooledCell]:
    """ngram over 3 backends x 5 graph modes, each cell a state mix, beside a baseline in every state; FLASH_ATTN's
    eager ngram cell ran and its PIECEWISE one accepts less (an alarm)."""
    cells, places = [], [(b, m) for b in BACKENDS for m in MODES]
    for (backend, mode), states in zip(places, MIXES + MIXES[:1], strict=True):
        cells.append(_cell(backend, mode, "ngram", states))
    cells[0] = _cell("FLASH_ATTN", "NONE", "ngram", {S.SUCCEEDED: 2})
    cells[1] = _cell("FLASH_ATTN", "PIECEWISE", "ngram", {S.SUCCEEDED: 2}, accepted=10)
    baselines = {(b, m): _cell(b, m, None, states) for (b, m), states in zip(places, reversed(MIXES + MIXES[:1]), strict=True)}
    for cell in cells:
        base = baselines[(cell.backend, cell.graph_mode)]
        if cell.speed and base.speed:
            cell.speedup = ratio(cell.speed, base.speed)
    return cells + list(baselines.values())


def _held_as(frame: pd.DataFrame, missing: object) -> pd.DataFrame:
    """The frame with every missing value replaced by ``missing`` (``"pandas"``: as pandas holds them)."""
    return frame if isinstance(missing, str) else frame.astype(object).where(frame.notna(), missing)


def _texts(drawing: Drawing) -> list[str]:
    """The texts matplotlib wrote in the drawing's SVG, a line each."""
    return texts(drawing.svg())


HOLDERS = pytest.mark.parametrize("missing", ["pandas", None, float("nan"), pd.NA], ids=["pandas", "None", "NaN", "NA"])


@HOLDERS
@pytest.mark.parametrize("metric", list(METRICS))
def test_the_heatmap_writes_values_marks_and_crash_kinds_never_a_missing_value(missing: object, metric: str) -> None:
    frame = _held_as(_frame(), missing)
    texts = _texts(heatmap(frame[frame["method"] == "ngram"], metric, "H200 · ngram · b1"))
    assert not [t for t in texts if MISSING_TEXT.search(t)], texts
    # One alarm among the 15 cells: one cell's marks line holds "!" (a missing alarm is no alarm), beside the legend's.
    assert len([t for t in texts if "!" in t.split() and not t.startswith("v downgraded")]) == 1, texts
    # A cell that only died shows its crash kind; one with no run and no crash shows that it has no result.
    assert "out_of_memory" in texts and "timeout" in texts and "no result" in texts


@HOLDERS
@pytest.mark.parametrize("metric", list(METRICS))
def test_a_heatmap_where_nothing_ran_is_drawn_grey_with_what_each_cell_holds(missing: object, metric: str) -> None:
    cells = [_cell(b, m, "ngram", states) for (b, m), states in zip([(b, m) for b in BACKENDS for m in MODES[:2]],
                                                                   [{S.QUEUED: 1}, {S.CRASHED: 1}, {S.RUNNING: 1},
                                                                    {S.FAILED: 1}, {S.CANCELLED: 1}, {S.TIMED_OUT: 1}], strict=True)]
    texts = _texts(heatmap(_held_as(cells_frame(cells), missing), metric, "t"))
    assert not [t for t in texts if MISSING_TEXT.search(t)], texts
    assert texts.count("no result") == 4 and "out_of_memory" in texts and "timeout" in texts


@pytest.mark.parametrize("metric", ["acceptance", "acceptance_length"])
def test_a_baseline_that_ran_reads_baseline_not_no_data_and_draws_no_scale_it_has_no_value_on(metric: str) -> None:
    """A baseline panel by acceptance once read "no data" in every square, beside a colour bar of -0.1 to 0.1 (by
    speedup): it ran, without drafts to accept."""
    frame = cells_frame([_cell(b, "NONE", None, {S.SUCCEEDED: 1}) for b in BACKENDS] + [_cell("FLASH_ATTN", "FULL", None, {S.QUEUED: 1})])
    texts = _texts(heatmap(frame, metric, "H200 · baseline · b1"))
    assert texts.count("baseline: no drafts") == 3 and texts.count("no result") == 1 and "no data" not in texts
    speedup = _texts(heatmap(frame, "speedup", "H200 · baseline · b1"))
    assert speedup.count("baseline") == 3 and not any(re.fullmatch(r"[-−]?0\.1\d*", t) for t in speedup), speedup


def test_the_matrix_panels_share_one_colour_scale() -> None:
    """Each panel once scaled itself: the same teal read 1.60x, 1.33x and 1.75x on three panels."""
    cells = [_cell("FLASH_ATTN", "FULL", "ngram", {S.SUCCEEDED: 1}), _cell("FLASH_ATTN", "NONE", "ngram", {S.SUCCEEDED: 1})]
    for cell, value in zip(cells, (1.33, 1.75), strict=True):
        cell.speedup = ratio(cell.speed, pool_repeats([RepeatSpeed(100.0 / value, 97.0 / value, 104.0 / value, 5)]))
    frame = cells_frame(cells)
    assert shared_scale(frame, "speedup") == pytest.approx((1.33, 1.75), abs=0.01)
    assert shared_scale(frame, "acceptance") == (0.0, 1.0) and shared_scale(frame.iloc[0:0], "speedup") is None
    one = heatmap(frame.iloc[[0]], "speedup", "t", shared_scale(frame, "speedup"))
    assert one.args[-1] == shared_scale(frame, "speedup")


@HOLDERS
def test_the_fallback_bars_draw_the_cells_that_ran(missing: object) -> None:
    frame = _held_as(_frame(), missing)
    ran = frame[frame["tokens_per_s"].map(lambda v: isinstance(v, float) and v == v)]
    texts = _texts(speed_bars(frame[frame["method"] == "ngram"], "t"))
    assert not [t for t in texts if MISSING_TEXT.search(t)], texts
    assert sum(t.startswith(tuple(BACKENDS)) for t in texts) == len(ran[ran["method"] == "ngram"])
    assert speed_bars(frame[frame["ran"] == 0], "t") is None


@HOLDERS
def test_the_sweep_chart_draws_the_cells_that_ran(missing: object) -> None:
    frame = _held_as(_frame(), missing)
    texts = _texts(throughput_by_cell(frame))
    assert not [t for t in texts if MISSING_TEXT.search(t)], texts
    assert sum(t.startswith("H200 / ") for t in texts) == int((frame["ran"] > 0).sum())
    assert throughput_by_cell(frame[frame["ran"] == 0]) is None


@HOLDERS
def test_the_history_draws_the_runs_that_have_a_time(missing: object) -> None:
    frame = _frame()
    frame["when"], frame["placed_by"], frame["acceptance_change"], frame["speed_change"] = frame["ran_at"], "run", False, False
    frame = _held_as(frame, missing)
    series = [(f"{b} {m}", group) for (b, m), group in frame.groupby(["backend", "graph_mode"], sort=True)]
    texts = _texts(history(series))
    assert not [t for t in texts if MISSING_TEXT.search(t)], texts
    assert history([(label, group[group["ran"] == 0]) for label, group in series]) is None
