"""Every page's tables whole at a 1400 x 900 window, in headless Chromium over the H200 sweeps of every kind (the
matrix, the capture bug, serving with a best-k sweep, calibration, the A/A pairs a CI comparison reads, noise): the page
never wider than the window, no table wider than its own box (a column cut off is a column a reader never sees), and
the headings a reader reads a page by inside the window."""

from collections.abc import Iterator

import httpx
import pytest

from app.config import Settings
from tests.browser import WIDTH
from tests.conftest import TOKEN
from tests.dashboards.h200 import DATA, MATRIX, imported, imported_folder, noise_imported
from tests.factories import register_worker, report_crash
from tests.live import serve

# The folders whose labels, graph modes and intervals made the widest tables: /matrix's 2,269 px and /compare's
# 2,312 px against the window's 1,336 before their cells wrapped.
SWEEPS = (*MATRIX, "capture-bug/h200-capture-bug", "batch3/h200-serving-8b-shape", "batch3/h200-fallback-repeats",
          "batch4/h200-calibration-t1")
FOLDERS = (DATA / "h200-2026-12-03" / "serving" / "h200-serving-8b-shape-c1-16", DATA / "h200-2026-12-04c" / "h200-bestk-8b",
           DATA / "h200-2026-12-04" / "h200-proof22-aa-fi", DATA / "h200-2026-12-04" / "h200-proof22-aa-fi-again")
CRASH_LOG = DATA / "crashlogs" / "own-cpu-free-memory.log"
# Each table's headings a reader reads its rows by, and the numbers they came for.
MATRIX_HEADINGS = ["method", "graph mode", "ran", "acceptance [95 %]", "tokens/s [95 %]", "speedup", "marks"]
COMPARE_HEADINGS = ["verdict", "method", "graph mode", "head / base [95 %]", "Δ acceptance, points [95 %]", "ran (base → head)", "why"]
PAGES = {
    "/": {},
    "/matrix": {"cells": MATRIX_HEADINGS},
    "/matrix?metric=speedup": {"cells": MATRIX_HEADINGS},
    "/matrix?sweep_id={h200-calibration-t1}": {"cells": MATRIX_HEADINGS},
    "/fallback": {"costs": ["method", "graph mode asked", "ran", "tokens/s [95 %]", "cost vs (b) best", "sweeps"]},
    "/serving": {"serving-1": ["series", "clients", "speedup [95 %]", "failed, % [95 %]", "runs"]},
    "/serving?mode=offline": {},
    "/alarms": {"alarm-table": ["kind", "method", "graph mode (ran)", "difference [95 %]", "build", "links"]},
    "/compare?base={h200-proof22-aa-fi}&head={h200-proof22-aa-fi-again}": {"changes": COMPARE_HEADINGS},
    "/compare?base_build=vllm-0.26.0&head_build=vllm-0.26.0-fi-full": {"changes": COMPARE_HEADINGS},
    "/history?build=vllm-0.26.0&method=draft_model&gpu_kind=H200": {},
    "/calibration": {},
    "/crashes": {},
    "/noise": {},
    "/sweeps/{h200-calibration-t1}": {"matrix": ["method", "resolved graph mode", "tokens/s [95 %]", "states"]},
    "/sweeps/{h200-bestk-8b}": {},
}
# Each table's box and width, and each heading's text and horizontal extent, as the page lays them out.
TABLES = """() => [...document.querySelectorAll("table")].map(t => ({
    id: t.id, scroll: t.scrollWidth, client: t.clientWidth, right: t.getBoundingClientRect().right,
    headings: [...t.rows[0].cells].map(h => ({text: h.innerText.trim(), left: h.getBoundingClientRect().left,
                                               right: h.getBoundingClientRect().right}))}))"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    """The sweeps served, with a CPU cell's crash: (the address, each sweep's id by its name, the first of a name)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('tables') / 'site.db'}"
    imported(url, *SWEEPS)
    for folder in FOLDERS:
        imported_folder(url, folder)
    noise_imported(url)
    with serve(Settings(database_url=url, token=TOKEN)) as base, httpx.Client(base_url=base, timeout=30) as http:
        report_crash(http, register_worker(http), CRASH_LOG.read_text())
        ids: dict[str, int] = {}
        for sweep in sorted(http.get("/api/v1/sweeps").json(), key=lambda s: s["id"]):
            ids.setdefault(sweep["name"], sweep["id"])
        yield base, ids


@pytest.fixture
def window(chromium) -> Iterator:
    """A tab at the laptop's 1400 x 900, scripts off as the pages are read without them."""
    tab = chromium.new_page(viewport={"width": WIDTH, "height": 900}, java_script_enabled=False)
    yield tab
    tab.close()


@pytest.mark.parametrize("path", list(PAGES))
def test_every_table_is_whole_in_a_1400_px_window_with_the_headings_a_reader_needs(site, window, path: str) -> None:
    base, ids = site
    assert window.goto(base + path.format_map(ids)).status == 200
    assert window.evaluate("document.scrollingElement.scrollWidth") <= WIDTH
    tables = {table["id"]: table for table in window.evaluate(TABLES)}
    for table in tables.values():
        # Wider than its box, a table scrolls inside it: its right columns are cut off at the window's edge.
        assert table["scroll"] <= table["client"] and table["right"] <= WIDTH, (path, table["id"], table["scroll"])
    for table_id, headings in PAGES[path].items():
        shown = {h["text"]: h for h in tables[table_id]["headings"]}
        for heading in headings:
            assert shown[heading]["left"] >= 0 and shown[heading]["right"] <= WIDTH, (path, table_id, heading)
        assert window.locator(f"#{table_id} tr").count() > 1, (path, table_id)  # rows under them, not an empty table
