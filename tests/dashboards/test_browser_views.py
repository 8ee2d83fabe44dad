"""Every analysis page in headless Chromium, over the real H200 data and a CPU sweep of real vLLM cells reported
through the worker protocol (with a real crash's log): filters, links between views, and screenshots saved under
var/screenshots/."""

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from tests.browser import WIDTH
from tests.conftest import TOKEN
from tests.dashboards.h200 import MATRIX, imported
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
def shots() -> Path:
    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True)
    return SHOTS


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


def test_a_sweep_page_gives_each_cell_its_interval_and_draws_it(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/")
    page.locator("#sweeps").get_by_role("link", name="h200-matrix-rest").click()
    rows = page.locator("#matrix tr")
    assert rows.count() == 1 + 4
    # TRITON_ATTN FULL_DECODE_ONLY draft_model: 5893 tok/s, its 5 rounds' interval read as 95 % (fallback.pool_repeats).
    texts = [rows.nth(i).inner_text() for i in range(1, 5)]
    assert any("5893.3 [" in text and "1 start × 5 rounds" in text for text in texts), texts
    assert page.locator("#chart svg").count() == 1
    _shot(page, shots, "sweep")


def test_fallback_headline_figures_and_filter(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/fallback?build=vllm-0.26.0")
    assert "0.41x [0.36, 0.47]" in page.locator("#headline").inner_text()
    assert page.locator("figure.chart svg").count() == 2
    _shot(page, shots, "fallback")
    page.select_option("select[name=method]", "dflash")
    page.locator("#filters button").click()
    assert "method=dflash" in page.url and page.locator("figure.chart svg").count() == 1
    assert page.locator("#costs tr").count() == 1 + 12


def test_matrix_heatmaps_toggle_and_crash_links(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/matrix?build=vllm-0.26.0")
    assert page.locator("figure.chart svg").count() == 2
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


def test_alarms_page_and_its_history_link(site: str, page, shots: Path) -> None:
    page.goto(f"{site}/alarms?build=vllm-0.26.0-fi-full")
    assert page.locator("#alarm-table tr.alarm").count() == 2
    _shot(page, shots, "alarms")
    page.locator("#alarm-table tr.alarm").first.get_by_role("link", name="history").click()
    assert "/history?" in page.url and page.locator("#history-chart svg").count() == 1
    _shot(page, shots, "history")


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
    assert set(page.locator("#costs tr td:nth-child(3)").all_inner_texts()) == {"FLASHINFER"}


def test_compare_of_sweeps_that_share_nothing_says_which_fields_differ(every_h200_sweep, page, shots: Path) -> None:
    site, ids = every_h200_sweep
    page.goto(f"{site}/compare?base={ids['h200-qwen3-8b-shape']}&head={ids['h200-calibration-t1']}")
    assert "Every base cell differs from every head cell in:" in page.locator("#empty").inner_text()
    rows = page.locator("#apart tr").all_inner_texts()
    assert "model\tqwen3_8b\ttarget" in rows and "workload.temperature\t0.0\t1.0" in rows, rows
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    _shot(page, shots, "compare-apart")
