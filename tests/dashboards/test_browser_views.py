"""Every analysis page in headless Chromium, over the real H200 data and a CPU sweep of real vLLM cells reported
through the worker protocol (with a real crash's log): filters, links between views, and screenshots saved under
var/screenshots/."""

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.analysis import request_acceptance
from app.config import Settings
from app.schemas.cell import CellResult
from dashboards import render
from tests.browser import WIDTH, emptied
from tests.conftest import TOKEN
from tests.dashboards import shown
from tests.dashboards.h200 import MATRIX, copy_of, imported
from tests.factories import claim, complete, register_worker, report_crash, submit, sweep_body, upload_log
from tests.live import serve

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "var" / "screenshots"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, ngram_cell, self_draft_cell, synthetic_crash_log: str) -> Iterator[str]:
    """The H200 matrix and the capture-bug sweep imported from their folders, and a CPU sweep whose cells ran on real
    vLLM (the session's ngram and draft_model cells, and a real crash's log) reported through the worker protocol."""
    url = f"sqlite:///{tmp_path_factory.mktemp('site') / 'site.db'}"
    imported(url, *MATRIX, "capture-bug/h200-capture-bug")
    ran_cells = {"ngram": ngram_cell, "draft_model": self_draft_cell}
    with serve(Settings(database_url=url, token=TOKEN)) as base, httpx.Client(base_url=base, timeout=30) as http:
        worker = register_worker(http)
        body = sweep_body(ROOT / "runners" / "prompts" / "draftbench.jsonl", name="cpu-sweep", repeats=1,
                          model=ngram_cell.spec["model"])
        assert submit(http, body).status_code == 201
        for job in (claim(http, worker), claim(http, worker)):
            cell = ran_cells[job["spec"]["speculative"]["method"]]
            assert upload_log(http, job["job_id"], worker, cell.log).status_code == 204
            outcome = {"result": cell.result, "resolved": {"resolved_backend": "CPU_ATTN", "resolved_graph_mode": "NONE"},
                       "exit_code": cell.returncode}
            assert complete(http, job["job_id"], worker, outcome).status_code == 200
        report_crash(http, worker, synthetic_crash_log, model=ngram_cell.spec["model"])
        yield base


@pytest.fixture(scope="module")
def every_h200_sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    """Every exported H200 sweep imported and served: (the address, the first sweep id of each name)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('every') / 'all.db'}"
    imported(url)
    with serve(Settings(database_url=url, token=TOKEN)) as base:
        ids: dict[str, int] = {}
        for sweep in sorted(httpx.get(f"{base}/api/v1/sweeps", timeout=30).json(), key=lambda s: s["id"]):
            ids.setdefault(sweep["name"], sweep["id"])
        yield base, ids


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Every H200 folder imported, served: the capture-bug sweep is older than ten of the others."""
    url = f"sqlite:///{tmp_path_factory.mktemp('everything') / 'h200.db'}"
    imported(url)
    with serve(Settings(database_url=url, token=TOKEN)) as base:
        yield base


@pytest.fixture(scope="module")
def shots() -> Path:
    return emptied(SHOTS)


def _shot(page, shots: Path, name: str) -> None:
    path = shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000


def test_index_shows_alarms_workers_and_sweeps(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/")
    assert page.locator("#alarms li").count() == 2
    assert page.locator("#workers tr").count() == 2  # the header and the live CPU worker
    assert page.locator("#sweeps").get_by_role("link", name="h200-matrix-rest").count() == 1
    _shot(page, shots, "index")
    page.locator("#alarms li").first.get_by_role("link", name="matrix").click()
    assert page.locator("#cells tr.alarm").count() == 2


def test_the_capture_bug_alarm_is_visible_on_the_overview_and_alarms_over_every_import(everything: str, page, shots: Path) -> None:
    bug = "FLASHINFER FULL_DECODE_ONLY (draft_model k=3, vllm-0.26.0-fi-full): acceptance 0.910 against 1.000 eager"
    page.goto(f"{everything}/")
    alarm = page.locator("#alarms li").filter(has_text=bug)
    assert alarm.count() == 1 and alarm.is_visible() and "-9.0 points [-9.4, -8.6]" in alarm.inner_text()
    checks = page.locator("#alarm-checks")
    assert checks.is_visible() and "18 cannot show a capture bug" in checks.inner_text()
    _shot(page, shots, "index-every-import")
    page.goto(f"{everything}/alarms")
    rows = page.locator("#alarm-table tr.alarm")
    assert rows.count() == 2 and rows.first.is_visible()
    assert "FULL_DECODE_ONLY" in rows.first.inner_text() and "-9.0 [-9.4, -8.6] points" in rows.first.inner_text()
    # Among the cells that could show a bug, not the 22 judged: 18 of those cannot (acceptance exactly 0 or 1).
    assert "2 alarm(s) among the 4 graphed cells that could show a capture bug (22 judged against an eager sibling, 18 of " \
           "them with acceptance exactly 0 or 1, which cannot)" in page.locator("#headline").inner_text()
    assert "18 cannot show" in page.locator("#checks").inner_text()


def test_a_sweep_page_gives_each_cell_its_interval_and_draws_it(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/")
    page.locator("#sweeps").get_by_role("link", name="h200-matrix-rest").click()
    rows = page.locator("#matrix tr")
    assert rows.count() == 1 + 4
    # TRITON_ATTN FULL_DECODE_ONLY draft_model: 5893 tok/s, its 5 rounds' interval read as 95 % (fallback.pool_repeats).
    texts = [rows.nth(i).inner_text() for i in range(1, 5)]
    assert any("5893.3 [" in text and "1 start × 5 rounds" in text for text in texts), texts
    [chart] = page.locator("#chart img").all()
    assert shown.loaded(chart)["natural_width"] > 300 and "Throughput per cell" in chart.get_attribute("alt")
    _shot(page, shots, "sweep")


def test_fallback_headline_figures_and_filter(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/fallback?build=vllm-0.26.0")
    assert "0.41x [0.36, 0.47]" in page.locator("#headline").inner_text()
    assert [shown.loaded(img)["natural_width"] > 300 for img in page.locator("figure.chart img").all()] == [True, True]
    _shot(page, shots, "fallback")
    page.select_option("select[name=method]", "dflash")
    page.locator("#filters button").click()
    assert "method=dflash" in page.url and page.locator("figure.chart img").count() == 1
    assert page.locator("#costs tr").count() == 1 + 12


def test_matrix_heatmaps_toggle_and_crash_links(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/matrix?build=vllm-0.26.0")
    assert [shown.loaded(img)["natural_width"] > 300 for img in page.locator("figure.chart img").all()] == [True, True]
    _shot(page, shots, "matrix-acceptance")
    page.get_by_role("link", name="output tokens/s (median over repeats)").click()
    assert "metric=tokens_per_s" in page.url
    _shot(page, shots, "matrix-tokens")
    page.goto(f"{site}/matrix?build=vllm-test")
    crash = page.locator("#cells a.badge.crash")
    assert crash.count() == 1
    crash.click()
    assert "/crashes/" in page.url and page.locator("section.crash-group").count() == 1
    assert page.locator("pre.excerpt").count() == 1
    _shot(page, shots, "crash-group")


def test_acceptance_by_prompt_category_and_per_request_histogram_of_real_vllm_cells(site: str, page, ngram_cell, shots: Path) -> None:
    """The CPU sweep's cells ran the shipped prompts' first six ("conversation"), vLLM counting each request: the
    matrix lists that category with the numbers its requests add up to, the sweep page draws their histogram."""
    sweep_id = _sweep(site, "cpu-sweep")
    requests = ngram_cell.result["requests"]
    accepted, tokens = sum(r["num_accepted_tokens"] for r in requests), sum(r["num_draft_tokens"] for r in requests)
    kept = request_acceptance.summarise(CellResult.model_validate(ngram_cell.result).requests)
    [found] = request_acceptance.by_category(kept)
    page.goto(f"{site}/matrix?sweep_id={sweep_id}")
    rows = [row.locator("td").all_inner_texts() for row in page.locator("#categories tr").all()[1:]]
    ngram = [cells for cells in rows if cells[1].startswith("ngram")]
    assert [cells[4:] for cells in ngram] == [[
        "conversation", "6", f"{accepted} / {tokens}", render.interval(found.rate, found.rate_low, found.rate_high),
        render.interval(found.length, found.length_low, found.length_high, 2), "1 of 1"]], rows
    assert any(cells[1].startswith("draft_model") and cells[4] == "conversation" for cells in rows), rows
    _shot(page, shots, "matrix-categories")
    page.goto(f"{site}/sweeps/{sweep_id}")
    [chart] = page.locator("#request-chart img").all()
    assert shown.loaded(chart)["natural_width"] > 300 and "per-request acceptance rate for 2 cells" in chart.get_attribute("alt")
    _shot(page, shots, "sweep-requests")


def test_alarms_page_and_its_history_link(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/alarms?build=vllm-0.26.0-fi-full")
    assert page.locator("#alarm-table tr.alarm").count() == 2
    _shot(page, shots, "alarms")
    page.locator("#alarm-table tr.alarm").first.get_by_role("link", name="history").click()
    assert "/history?" in page.url and shown.loaded(page.locator("#history-chart img"))["natural_width"] > 300
    _shot(page, shots, "history")


def test_the_capture_bug_build_against_the_unpatched_one_cell_by_cell(site: str, page) -> None:
    # The two builds ran their FLASHINFER cells with other rounds and sweep names: they compare by what they measured.
    page.goto(f"{site}/compare?base_build=vllm-0.26.0&head_build=vllm-0.26.0-fi-full")
    rows = {r.locator("td").nth(4).inner_text(): r.inner_text() for r in page.locator("#changes tr").all()[1:]}
    assert sorted(rows) == ["FULL_AND_PIECEWISE", "FULL_DECODE_ONLY", "NONE"], rows
    for graphed in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY"):
        assert rows[graphed].startswith("worse") and "-9.0 points [" in rows[graphed], rows[graphed]
    assert rows["NONE"].startswith("undecided") and "-9.0 points" not in rows["NONE"]


def test_compare_and_crashes(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/compare?base_build=vllm-0.26.0-fi-full&head_build=vllm-0.26.0-fi-full")
    assert page.locator("#changes tr").count() == 1 + 3
    _shot(page, shots, "compare")
    page.goto(f"{site}/crashes")
    assert page.locator("section.crash-group").count() == 1
    _shot(page, shots, "crashes")
    page.goto(f"{site}/fallback?build=nothing-here")
    assert page.locator("#empty").count() == 1
    _shot(page, shots, "empty")


@pytest.fixture(scope="module")
def calibration_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The proof's database (its temperature-1 calibration cells missed every position) with batch 4's calibration
    sweep at temperature 1 imported beside it: one config, two sweeps of one build, pooled unless a sweep is named."""
    url = copy_of("proof", tmp_path_factory.mktemp("calibration"))
    imported(url, "batch4/h200-calibration-t1")
    with serve(Settings(database_url=url, token=TOKEN)) as base:
        yield base


@pytest.fixture(scope="module")
def serving_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The H200 serving sweeps: the 8B shape at 1, 16 and 64 clients beside its baseline, the proof's target without one."""
    url = f"sqlite:///{tmp_path_factory.mktemp('serving') / 'site.db'}"
    imported(url, "batch3/h200-serving-8b-shape", "batch2/h200-serving")
    with serve(Settings(database_url=url, token=TOKEN)) as base:
        yield base


def _sweep(site: str, name: str) -> int:
    """The newest sweep of that name."""
    return max(s["id"] for s in httpx.get(f"{site}/api/v1/sweeps").json() if s["name"] == name)


def test_calibration_shows_asked_against_measured_and_flags_each_miss(calibration_site: str, page, shots: Path) -> None:
    page.goto(f"{calibration_site}/calibration?sweep_id={_sweep(calibration_site, 'h200-calibration-t1')}")
    cells = page.locator("section.calibration-cell")
    assert cells.count() == 4 and "No miss" in page.locator("#headline").inner_text()
    # FLASH_ATTN asked 0.8 at position 1 and accepted 15192 of 18938 drafts: 0.802 [0.796, 0.808].
    cell = cells.filter(has_text="FLASH_ATTN · FULL_AND_PIECEWISE").filter(has_text="asked 0.8/0.5/0.3")
    assert cell.locator("table tr").nth(1).inner_text().split("\t") == ["1", "0.800", "0.802 [0.796, 0.808]", "15192 / 18938", "no"]
    assert "1 engine start (job" in cell.locator(".pooled").inner_text() and shown.loaded(cell.locator("figure img"))["natural_width"] > 300
    assert page.locator(".badge.alarm").count() == 0
    # The proof's temperature-1 cells: every position's interval excludes the rate asked for.
    page.goto(f"{calibration_site}/calibration?sweep_id=2")
    assert "4 of 4 calibration cell(s) miss a rate asked for" in page.locator("#headline").inner_text()
    assert page.locator("section.calibration-cell h2 .badge.alarm").count() == 4
    assert page.locator("table.positions tr.alarm").count() == 12
    first = page.locator("table.positions tr.alarm").first.inner_text().split("\t")
    assert first[1] == "0.800" and first[2].startswith("0.816 [") and first[4] == "yes"
    # Both sweeps pooled: one start of the two missed on its own counts, and the pooled cell misses.
    page.goto(f"{calibration_site}/calibration")
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    assert "Starts that missed on their own counts: 1 of 2." in page.locator("section.calibration-cell").last.inner_text()
    # Printed to 3 decimals, FLASHINFER's pooled third position would read [0.200, 0.210] against an asked 0.200 and
    # still be a miss: it gets the decimals that show why.
    pooled = cells.filter(has_text="FLASHINFER · FULL_AND_PIECEWISE").filter(has_text="asked 0.9/0.6/0.2 · vllm-0.26.0")
    row = pooled.filter(has_text="(h200-calibration-t1)").locator("table tr").nth(3).inner_text().split("\t")
    assert row == ["3", "0.2000", "0.2050 [0.2003, 0.2097]", "5859 / 28587", "yes"]
    _shot(page, shots, "calibration")


def test_the_serving_page_reads_each_speedup_against_the_baseline_of_its_clients(serving_site: str, page, shots: Path) -> None:
    page.goto(f"{serving_site}/")
    page.locator("#nav").get_by_role("link", name="Serving").click()
    assert page.url.endswith("/serving")
    group = page.locator("section.serving-group[data-title='H200 · FLASH_ATTN · FULL_AND_PIECEWISE · vllm-0.26.0']")
    # The click's URL commits before the table is parsed: on a slow host .all() read no rows.
    group.locator("table.serving tr").nth(1).wait_for()
    rows = [row.locator("td").all_inner_texts() for row in group.locator("table.serving tr").all()[1:]]
    # The 8B-shape draft's rows: the only draft with a baseline at its clients, so the only speedups.
    speedups = {int(cells[1]): float(cells[11].split("x")[0]) for cells in rows  # the speedup column, after tokens/J
                if cells[0].startswith("draft_model k=3") and re.match(r"\d+\.\d\dx \[", cells[11])}
    # /api/v1/results: 1.596 at 1 client and 1.332 at 16, each over the baseline with as many clients; each marked, as
    # vLLM 0.26 ran these draft_model cells without the async scheduling their baselines had.
    assert sorted(speedups) == [1, 16, 64], rows
    assert all(cells[11].endswith("] sync scheduling") for cells in rows if cells[0].endswith("(h200-serving-8b-shape)")
               and int(cells[1]) in speedups)
    assert speedups[1] == pytest.approx(1.60, rel=0.02) and speedups[16] == pytest.approx(1.33, rel=0.02)
    assert "102 of 192 sent" in page.locator("#failures").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    img = group.locator("figure.chart img")
    drawn = shown.loaded(img)
    assert drawn["natural_width"] > 300 and drawn["x"] + drawn["width"] <= WIDTH
    # What the image draws, as the browser lays its SVG out: the legend whole inside it, under every plot.
    svg = shown.opened(page, img)
    figure, legend = svg.locator("svg").first.bounding_box(), svg.locator("#legend_1").bounding_box()
    assert figure["x"] <= legend["x"] and legend["x"] + legend["width"] <= figure["x"] + figure["width"]
    assert "draft_model k=3 (h200-serving-8b-shape)" in svg.locator("#legend_1 text").all_text_contents()
    for axes in range(1, 7):
        plot = svg.locator(f"#axes_{axes} > [id^=patch]").first.bounding_box()
        assert legend["y"] >= plot["y"] + plot["height"] - 1  # under every plot, on no point
    svg.close()
    _shot(page, shots, "serving")


def test_the_fallback_headline_a_reader_sees_pools_every_start_and_keeps_its_reference(every_h200_sweep, page, shots: Path) -> None:
    # The matrix's one FLASHINFER start (0.41x) and batch 3's three (0.48x) pooled: 3969 / 8416 tok/s over 4 starts a side.
    site, _ = every_h200_sweep
    said = "0.47x [0.42, 0.52] of FLASH_ATTN with FULL_AND_PIECEWISE (4 engine starts, 20 rounds, against 4 starts, 20 rounds)"
    page.goto(f"{site}/fallback")
    assert said in page.locator("#headline").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    _shot(page, shots, "fallback-every-sweep")
    # Narrowed to FLASHINFER the headline once read 0.55x of FLASHINFER itself: its FLASH_ATTN reference was dropped.
    page.select_option("select[name=backend]", "FLASHINFER")
    page.locator("#filters button").click()
    assert "backend=FLASHINFER" in page.url and said in page.locator("#headline").inner_text()
    assert set(page.locator("#costs tr td:nth-child(4)").all_inner_texts()) == {"FLASHINFER"}


def test_compare_of_sweeps_that_share_nothing_says_which_fields_differ(every_h200_sweep, page, shots: Path) -> None:
    site, ids = every_h200_sweep
    page.goto(f"{site}/compare?base={ids['h200-qwen3-8b-shape']}&head={ids['h200-calibration-t1']}")
    assert "Every base cell differs from every head cell in:" in page.locator("#empty").inner_text()
    rows = page.locator("#apart tr").all_inner_texts()
    assert "model\tqwen3_8b\ttarget" in rows and "workload.temperature\t0.0\t1.0" in rows, rows
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    _shot(page, shots, "compare-apart")
