"""/matrix over a serving line as a reader sees it in headless Chromium: the H100's best-k line
(``tests/data/h100-2026-12-05b`` and ``-05c``) is one backend and one graph mode at four loads and three k and a
baseline, so the page draws a one-square heatmap per load and k. Stacked one under another they ran about 6,000 px
down before the table; side by side they fill the window's width, and each square still says its value."""

from collections.abc import Iterator

import pytest

from app.config import Settings
from tests.browser import WIDTH
from tests.conftest import TOKEN
from tests.dashboards.h200 import DATA, imported_folder
from tests.live import serve

FOLDERS = [DATA / "h100-2026-12-05b" / name for name in ("bestk-8b-line-b", "bestk-8b-line-c16-64", "bestk-8b-line-c1-4")] + [
    DATA / "h100-2026-12-05c" / name for name in ("bestk-8b-line-k4", "bestk-8b-line-k2", "bestk-8b-line-c1-4-again")]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('matrix-panels') / 'store.db'}"
    for folder in FOLDERS:
        imported_folder(url, folder)
    with serve(Settings(database_url=url, token=TOKEN)) as base:
        yield base


def test_a_serving_lines_one_square_panels_sit_side_by_side_inside_the_window(site: str, page) -> None:
    page.goto(f"{site}/matrix?metric=speedup")
    figures = page.locator("#panels figure").all()
    boxes = [f.bounding_box() for f in figures]
    # A panel per load and k, the baseline's included: 4 loads x (3 k + the baseline).
    assert len(boxes) == 16
    assert all(b["x"] >= 0 and b["x"] + b["width"] <= WIDTH for b in boxes)
    rows = sorted({round(b["y"]) for b in boxes})
    assert len(rows) <= 6, rows  # three or more a row at 1400 px
    # Everything the panels hold is above the table, within a few screens: one under another it took 16 panels' height.
    table = page.locator("#cells").bounding_box()
    assert table["y"] < 3.5 * max(b["height"] for b in boxes) * len(rows) and table["y"] < sum(b["height"] for b in boxes) / 2
    # Each square still reads its own speedup: the alt text names the panel, the square's text its value.
    titles = [f.get_attribute("data-title") for f in figures]
    assert all(t.startswith("H100 · ") for t in titles) and len(set(titles)) == 16, titles
