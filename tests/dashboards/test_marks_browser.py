"""What ran, as a reader sees it in headless Chromium with JavaScript off, over the H200 matrix, the serving sweep and the
calibration sweep imported: every page that titles a cell by the graph mode it asked for marks a downgrade and an eager
draft with /matrix's words, in one colour per meaning on every page (red: ran less than asked; blue: sync scheduling);
screenshots saved under var/screenshots/marks/."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import Settings
from tests.browser import WIDTH, emptied
from tests.conftest import TOKEN
from tests.dashboards.h200 import MATRIX, imported
from tests.live import serve

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "var" / "screenshots" / "marks"
PAGES = ["/matrix", "/fallback", "/serving", "/calibration", "/serving?mode=offline"]
RED = "rgb(255, 205, 210)"  # a mark of what ran less than asked: downgraded, draft eager beside captured graphs
ROW_RED = "rgb(253, 236, 234)"  # a row of such a cell
BLUE = "rgb(211, 228, 245)"  # sync scheduling


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('marks') / 'site.db'}"
    imported(url, *MATRIX, "batch2/h200-serving", "batch3/h200-serving-8b-shape", "batch4/h200-calibration-t1")
    with serve(Settings(database_url=url, token=TOKEN)) as base:
        yield base


@pytest.fixture(scope="module")
def shots() -> Path:
    return emptied(SHOTS)


def _colours(page, selector: str) -> set[str]:
    return set(page.locator(selector).evaluate_all("found => found.map(e => getComputedStyle(e).backgroundColor)"))


@pytest.mark.parametrize("path", PAGES)
def test_each_page_marks_what_ran_in_matrix_words_and_one_colour_per_meaning(site: str, page, shots: Path, path: str) -> None:
    page.goto(f"{site}{path}")
    marks = page.locator(".badge.downgraded, .badge.eager, .badge.sync")
    words = set(marks.all_inner_texts())
    assert words and words <= {"downgraded", "draft eager", "sync scheduling"}, words
    assert _colours(page, ".badge.downgraded, .badge.eager") <= {RED}
    assert _colours(page, ".badge.sync") <= {BLUE}
    assert page.locator(".badge.eager", has_text="sync scheduling").count() == 0
    assert _colours(page, "tr.fallback td") <= {ROW_RED}
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    page.screenshot(path=str(shots / f"{path.strip('/').replace('?', '-').replace('=', '-')}.png"), full_page=True)


def test_serving_says_under_the_mode_asked_that_vllm_ran_another(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/serving")
    section = page.locator("section.serving-group[data-title^='H200 · FLASHINFER · FULL_AND_PIECEWISE']")
    said = section.locator("p.what-ran")
    assert said.is_visible() and "2 of 2 cells asked FULL_AND_PIECEWISE and vLLM ran PIECEWISE (downgraded)" in said.inner_text()
    assert section.locator("tr.fallback").count() == 2
    badge = section.locator(".badge.downgraded").first
    assert badge.is_visible() and badge.get_attribute("title") == "asked FULL_AND_PIECEWISE; vLLM ran PIECEWISE"
    section.screenshot(path=str(shots / "serving-flashinfer.png"))


def test_calibration_marks_its_flashinfer_cells_in_their_heading(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/calibration?backend=FLASHINFER")
    headings = page.locator("section.calibration-cell h2")
    assert headings.count() == 2
    for i in range(2):
        assert "FULL_AND_PIECEWISE" in headings.nth(i).inner_text()
        assert headings.nth(i).locator(".badge.downgraded").inner_text() == "downgraded"
        assert headings.nth(i).locator(".badge.eager").inner_text() == "draft eager"
    assert page.locator("p.what-ran").first.is_visible()
    page.screenshot(path=str(shots / "calibration-flashinfer.png"), full_page=True)
