"""A serving cell's figures over its engine starts, computed by hand."""

import pytest

from app.cells import identity, serving
from app.cells.pooling import PooledCell


def _start(ttft_p50: float, ttft_p99: float | None, completed: int, failed: int) -> dict:
    """One engine start's ``Result.serving`` as stored (TPOT and ITL fixed: their pooling is TTFT's)."""
    return {"concurrency": 4, "ttft_ms": {"p50": ttft_p50, "p90": ttft_p50, "p99": ttft_p99},
            "tpot_ms": {"p50": 5.0, "p99": 6.0}, "itl_ms": {"p50": 10.0, "p99": 12.0},
            "output_tokens_per_s": 100.0, "requests_per_s": 2.0, "completed": completed, "failed": failed}


def _cell(*starts: dict) -> PooledCell:
    variant = identity.variant({"model": "m", "speculative": None, "mode": "serve", "concurrency": 4})
    label = identity.labels([variant])[variant.measured]
    return PooledCell("b", "H200", "FLASH_ATTN", "FULL", None, variant, label, concurrency=4, serving=list(starts))


def test_a_percentile_is_the_median_over_starts_with_its_order_statistic_interval() -> None:
    figures = serving.figures(_cell(_start(20.0, 40.0, 90, 10), _start(10.0, None, 95, 5), _start(30.0, 60.0, 100, 0)))
    assert figures is not None and figures.starts == 3
    # TTFT p50 over 3 starts: median 20 of (10, 20, 30); [x_(1), x_(3)] holds the median with 1 - 2 (1/8) = 0.75.
    p50 = figures.latency["ttft_p50"]
    assert (p50.median, p50.low, p50.high, p50.confidence, p50.n) == (20.0, 10.0, 30.0, 0.75, 3)
    # p99 from the 2 starts that reported one: median 50, [40, 60] at 1 - 2 (1/4) = 0.5.
    p99 = figures.latency["ttft_p99"]
    assert (p99.median, p99.low, p99.high, p99.confidence, p99.n) == (50.0, 40.0, 60.0, 0.5, 2)
    assert figures.latency["tpot_p99"].median == 6.0


def test_the_failed_share_sums_the_starts_with_wilsons_interval() -> None:
    figures = serving.figures(_cell(_start(20.0, 40.0, 90, 10), _start(10.0, None, 95, 5), _start(30.0, 60.0, 100, 0)))
    assert (figures.completed, figures.failed, figures.sent) == (285, 15, 300)
    # p = 15/300 = 0.05, z^2 = 3.8415: centre = (0.05 + 3.8415/600) / (1 + 3.8415/300) = 0.055690,
    # half = 1.96 / 1.012805 * sqrt(0.05 * 0.95 / 300 + 3.8415 / 360000) = 0.025158: [0.030532, 0.080848].
    share, low, high = figures.failed_share
    assert share == 0.05 and low == pytest.approx(0.030532, abs=1e-6) and high == pytest.approx(0.080847, abs=1e-6)


def test_one_start_has_its_values_without_an_interval_and_unreadable_figures_are_counted() -> None:
    figures = serving.figures(_cell(_start(18.27, 36.22, 90, 102), {"concurrency": 0}))
    assert (figures.starts, figures.unreadable) == (1, 1)
    p50 = figures.latency["ttft_p50"]
    assert (p50.median, p50.low, p50.high) == (18.27, None, None)
    # The H200 1-client baseline: 102 failed of 192 sent.
    assert figures.failed_share[0] == 102 / 192
    assert serving.figures(_cell()) is None


def test_the_failed_share_against_the_baseline_is_newcombes_difference() -> None:
    cell, base = (serving.figures(_cell(_start(1.0, 2.0, 100 - failed, failed))) for failed in (12, 50))
    change = serving.failed_against(cell, base)
    # Wilson: 12/100 -> [0.069993, 0.198119], 50/100 -> [0.403832, 0.596168]; d = 0.12 - 0.50 = -0.38,
    # low = d - sqrt((0.12 - 0.069993)^2 + (0.596168 - 0.5)^2) = -0.488393,
    # high = d + sqrt((0.198119 - 0.12)^2 + (0.5 - 0.403832)^2) = -0.256101.
    assert change.difference == pytest.approx(-0.38)
    assert change.low == pytest.approx(-0.488393, abs=1e-5) and change.high == pytest.approx(-0.256101, abs=1e-5)
    assert change.flagged
    nothing = serving.figures(_cell(_start(1.0, 2.0, 0, 0)))
    assert serving.failed_against(cell, nothing) is None
