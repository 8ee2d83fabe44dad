"""What a reader sees of the pages at a 1400 px window, in headless Chromium over the H200 import and a real CPU
crash's log: nothing wider than the window, the crash excerpt whole, /history's axes and legend readable, /compare
saying what to pick; screenshots saved under var/screenshots/layout/."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from tests.browser import WIDTH, emptied
from tests.conftest import TOKEN
from tests.dashboards import shown
from tests.dashboards.h200 import MATRIX, imported
from tests.factories import register_worker, report_crash
from tests.live import serve

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "var" / "screenshots" / "layout"
# A CPU start that died of free memory: its log's lines run to 3,411 characters.
CRASH_LOG = ROOT / "tests" / "data" / "crashlogs" / "own-cpu-free-memory.log"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('layout') / 'site.db'}"
    imported(url, *MATRIX, "capture-bug/h200-capture-bug")
    with serve(Settings(database_url=url, token=TOKEN)) as base, httpx.Client(base_url=base, timeout=30) as http:
        report_crash(http, register_worker(http), CRASH_LOG.read_text())
        yield base


@pytest.fixture(scope="module")
def shots() -> Path:
    return emptied(SHOTS)


def _fits(page, shots: Path, name: str) -> None:
    """Nothing wider than the window (a wide table scrolls in its own box); the page's screenshot saved."""
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


@pytest.mark.parametrize(("path", "name"), [("/", "index"), ("/matrix", "matrix"), ("/matrix?metric=speedup", "matrix-speedup"),
                                            ("/fallback", "fallback"), ("/alarms", "alarms")])
def test_no_page_is_wider_than_the_window(site: str, page, shots: Path, path: str, name: str) -> None:
    page.goto(site + path)
    _fits(page, shots, name)


def test_the_matrix_table_is_whole_in_the_window_and_scrolls_in_its_own_box_in_a_narrower_one(site: str, page,
                                                                                            shots: Path) -> None:
    page.goto(f"{site}/matrix")
    table = page.locator("#cells")
    assert table.evaluate("t => t.scrollWidth <= t.clientWidth")  # every column inside the window
    _fits(page, shots, "matrix")
    page.set_viewport_size({"width": 900, "height": 1000})
    assert table.evaluate("t => t.scrollWidth > t.clientWidth")  # narrower than its columns: it scrolls, the page never
    assert table.bounding_box()["x"] + table.bounding_box()["width"] <= 900
    assert page.evaluate("document.documentElement.scrollWidth") <= 900


def test_the_crash_excerpt_is_whole_inside_the_window(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/crashes")
    excerpt = page.locator("pre.excerpt").first
    box = excerpt.bounding_box()
    assert box["x"] + box["width"] <= WIDTH
    assert excerpt.evaluate("e => e.scrollWidth <= e.clientWidth")  # wrapped: no line runs past its right edge
    _fits(page, shots, "crashes")


def test_the_history_legend_is_whole_and_outside_the_plots(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/history?build=vllm-0.26.0&method=draft_model&gpu_kind=H200")
    img = page.locator("#history-chart img")
    box = shown.loaded(img)
    assert box["natural_width"] > 300 and box["x"] + box["width"] <= WIDTH
    drawn = min(len(page.locator("#points tr").all_inner_texts()) - 1, 8)
    svg = shown.opened(page, img)
    legend = svg.locator("#legend_1")
    assert legend.locator("[id^=line2d]").count() >= drawn  # a marker per drawn series
    legend_box, figure = legend.bounding_box(), svg.locator("svg").first.bounding_box()
    assert figure["x"] <= legend_box["x"] and legend_box["x"] + legend_box["width"] <= figure["x"] + figure["width"]
    for axes in ("#axes_1", "#axes_2"):
        plot = svg.locator(f"{axes} > [id^=patch]").first.bounding_box()
        assert legend_box["y"] >= plot["y"] + plot["height"] - 1  # under the plots, on no point
    svg.close()
    _fits(page, shots, "history")


def test_compare_with_nothing_picked_says_what_to_pick_and_offers_the_stored_ones(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/compare")
    assert page.locator("h1").inner_text() == "Compare"
    assert page.locator("#empty").inner_text().startswith("Pick a base and a head above")
    sweeps = page.locator("select[name=base] option").all_inner_texts()
    assert any("h200-matrix" in s for s in sweeps) and any("cpu-crash" in s for s in sweeps)
    builds = page.locator("select[name=head_build] option").all_inner_texts()
    assert {"vllm-0.26.0", "vllm-0.26.0-fi-full", "vllm-test"} <= set(builds)
    _fits(page, shots, "compare-empty")
    page.locator("select[name=base_build]").select_option("vllm-0.26.0")
    page.locator("select[name=head_build]").select_option("vllm-0.26.0")
    page.get_by_role("button", name="Show").click()
    assert page.locator("h1").inner_text() == "Compare build vllm-0.26.0 → build vllm-0.26.0"
    assert page.locator("#changes tr").count() == 1 + 24  # the header, then every cell of the build against itself
    _fits(page, shots, "compare")
