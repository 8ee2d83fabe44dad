"""Every analysis page in headless Chromium, over the real H200 data and a CPU sweep of real vLLM cells reported
through the worker protocol (with a real crash's log): filters, links between views, and screenshots saved under
var/screenshots/."""

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.config import Settings
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
def everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Every H200 folder imported, served: the capture-bug sweep is older than ten of the others."""
    url = f"sqlite:///{tmp_path_factory.mktemp('everything') / 'h200.db'}"
    imported(url)
    with serve(Settings(database_url=url, token=TOKEN)) as base:
        yield base


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
    assert "2 alarm(s) among 22 graphed cell(s) judged" in page.locator("#headline").inner_text()
    assert "18 cannot show" in page.locator("#checks").inner_text()


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
