"""A cell's deaths link their logs on every page that shows the cell's crashes, and only logs that were kept: a crash
reported without its log (the service refused it) is said, never linked (a 404)."""

import re
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from app.cells import identity
from app.cells.pooling import PooledCell
from app.config import Settings
from app.enums import JobState
from dashboards import marks
from dashboards.data import serving_frame
from dashboards.frames import records
from tests.cells.test_crashed_in import died_four_ways
from tests.conftest import TOKEN
from tests.live import serve

LOG_LINK = r'href="(/api/v1/jobs/(\d+)/log)"'


def test_a_cells_deaths_link_the_logs_kept_and_say_how_many_kept_none() -> None:
    text = str(marks.crash_logs([5, 6, 7, 8], died=5))
    assert re.findall(LOG_LINK, text) == [(f"/api/v1/jobs/{j}/log", str(j)) for j in (5, 6, 7)]
    assert re.sub(r"<[^>]+>", "", text) == "crash log 5 crash log 6 crash log 7 and 1 more 1 died without a log kept"
    assert str(marks.crash_logs([], died=2)) == "2 died without a log kept" and str(marks.crash_logs([], died=0)) == ""
    # A cell that only died: no result yet, the sweep that holds it, its deaths' logs.
    only_died = str(marks.links([], [], held=[3], crashed=[9], died=1))
    assert re.sub(r"<[^>]+>", "", only_died) == "no result yet · sweep 3 · crash log 9"


def test_serving_rows_link_their_deaths_logs() -> None:
    variant = identity.variant({"model": "m", "speculative": None, "mode": "serve", "concurrency": 4})
    cell = PooledCell("b", "H200", "FLASH_ATTN", "FULL", None, variant, "baseline", concurrency=4, sweep_ids=[1],
                      sweep_names=["s"], job_ids=[11, 12], crashed_in=[12],
                      states=Counter({JobState.CRASHED: 1, JobState.TIMED_OUT: 1}))
    [row] = records(serving_frame([cell]))
    assert row["crashed_jobs"] == "12" and re.findall(LOG_LINK, str(marks.row_links(row))) == [("/api/v1/jobs/12/log", "12")]
    assert "1 died without a log kept" in str(marks.row_links(row))


def test_every_page_that_shows_a_cells_crashes_links_each_kept_log(client: TestClient, dataset) -> None:
    sweep, (crashed, bare, timed_out, _) = died_four_ways(client, dataset)
    cell = "gpu_kind=cpu&method=ngram&backend=CPU_ATTN&graph_mode=NONE"
    for page in (f"/matrix?sweep_id={sweep}", f"/sweeps/{sweep}", f"/history?{cell}", f"/compare?base={sweep}&head={sweep}"):
        html = client.get(page).text
        linked = {int(job) for _, job in re.findall(LOG_LINK, html)}
        assert {crashed, timed_out} <= linked and bare not in linked, (page, linked)
        assert f"crash log {crashed}" in html and "1 died without a log kept" in html, page
        assert all(client.get(f"/api/v1/jobs/{job}/log").status_code == 200 for job in linked), page


@pytest.fixture
def live_server(sqlite_url: str) -> Iterator[str]:
    with serve(Settings(database_url=sqlite_url, token=TOKEN)) as url:
        yield url


def test_a_browser_follows_a_crashed_cells_log_from_the_matrix(live_server: str, chromium, dataset) -> None:
    """The reader sees the crash, follows its log and reads it; the start that died without a log is said, not linked."""
    with httpx.Client(base_url=live_server, timeout=30) as http:
        sweep, (crashed, bare, timed_out, _) = died_four_ways(http, dataset)
    page = chromium.new_page(java_script_enabled=False)
    try:
        page.goto(f"{live_server}/matrix?sweep_id={sweep}")
        row = page.locator("#cells tr", has_text="ngram")
        assert row.locator("a.badge.crash").count() >= 1 and "1 died without a log kept" in row.inner_text()
        assert page.locator(f'a[href="/api/v1/jobs/{bare}/log"]').count() == 0
        logs = row.locator("a.crash-log")
        assert logs.all_inner_texts() == [f"crash log {crashed}", f"crash log {timed_out}"]
        logs.first.click()
        assert "illegal memory access" in page.locator("body").inner_text()
        assert page.url.endswith(f"/api/v1/jobs/{crashed}/log")
    finally:
        page.close()
