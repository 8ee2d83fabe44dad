"""The HTML dashboards: rendered by the server (TestClient) and seen in a real browser (Playwright).

Sweeps and results are made through the worker protocol, as a worker would, so the pages are
checked against what the service really stores.
"""

import re
import string
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from app.config import Settings
from tests.conftest import AUTH, TOKEN
from tests.dashboards import shown
from tests.dashboards.h200 import DATA, imported_folder, in_process
from tests.factories import Registered, cell_result, claim, complete, register_worker, run_history, submit, sweep_body
from tests.live import serve

ROOT = Path(__file__).resolve().parents[2]
MATRIX_COLUMNS = ["GPU kind", "backend", "graph mode", "resolved graph mode", "method",
                  "acceptance [95 %]", "tokens/s [95 %]", "draft eager", "runs", "states"]


class _Tables(HTMLParser):
    """Collects each ``<table id=...>`` as rows of (row class, cell texts): enough to read the matrix."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[tuple[str, list[str]]]] = {}
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "table":
            self._table = attributes.get("id") or ""
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append((attributes.get("class") or "", []))
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1][1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables(html: str) -> dict[str, list[tuple[str, list[str]]]]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def matrix_rows(html: str) -> list[dict[str, str]]:
    """The #matrix table's body rows as dicts by column header, plus the row's class under ``_class``."""
    header, *body = tables(html)["matrix"]
    assert header[1] == MATRIX_COLUMNS
    return [dict(zip(MATRIX_COLUMNS, cells, strict=True), _class=cls) for cls, cells in body]


def new_sweep(client: httpx.Client, body: dict[str, Any]) -> tuple[int, dict]:
    """Register a worker (a sweep's build must be one a worker offers), submit; return (worker, sweep)."""
    worker = register_worker(client)
    response = submit(client, body)
    assert response.status_code == 201, response.text
    return worker, response.json()


def finish_jobs(client: httpx.Client, worker: Registered, count: int, *, resolved: dict[str, Any] | None = None) -> list[dict]:
    """Claim ``count`` jobs and report a result for each, as a worker does; return the claimed jobs."""
    jobs = [claim(client, worker) for _ in range(count)]
    for job in jobs:
        outcome = {"result": cell_result(), "resolved": resolved or {}, "exit_code": 0, "duration_s": 12}
        assert complete(client, job["job_id"], worker, outcome).status_code == 200
    return jobs


# --- server-side rendering -------------------------------------------------------------------


def test_index_lists_sweeps_with_a_link_to_each(client, dataset) -> None:
    assert "No sweep yet" in client.get("/").text
    _, sweep = new_sweep(client, sweep_body(dataset, name="eagle-vs-ngram"))
    response = client.get("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert f'href="/sweeps/{sweep["id"]}"' in response.text
    [_, (_, cells)] = tables(response.text)["sweeps"]
    assert cells[:5] == [str(sweep["id"]), "eagle-vs-ngram", "vllm-test", "cpu", "queued"]
    assert cells[5] == "queued 4"


def test_an_imported_sweeps_jobs_that_never_ran_read_not_run_not_queued(sqlite_url) -> None:
    imported_folder(sqlite_url, DATA / "h200-2026-12-04c" / "h200-bestk-8b")  # 10 of its 16 jobs ran
    for client in in_process(sqlite_url):
        [_, (_, cells)] = tables(client.get("/").text)["sweeps"]
        assert cells[3:6] == ["H200", "finished", "not run 6, succeeded 10"], cells


def _page_once(client: httpx.Client, path: str, until, timeout_s: float = 20.0) -> str:
    """``path``'s HTML once ``until(html)`` holds (the service's schedule refreshes some sections)."""
    deadline = time.monotonic() + timeout_s
    while True:
        html = client.get(path).text
        if until(html) or time.monotonic() > deadline:
            return html
        time.sleep(0.1)


def test_index_lists_open_regressions_as_of_the_last_refresh(make_client, dataset) -> None:
    client = make_client(stall_check_seconds=0.2)
    # The first view of a process reads the histories itself; later ones show the schedule's last reading.
    assert 'id="regressions-empty"' in client.get("/").text
    run_history(client, dataset, [100.0, 101.0, 99.0, 100.0, 70.0, 71.0])
    # The schedule may read the histories while the last results arrive: wait for its reading after them.
    page = _page_once(client, "/", lambda html: 'id="regressions"' in html and "(-29.5 %)" in html)
    [item] = re.findall(r'<ul id="regressions">(.*?)</ul>', page, re.S)
    text = " ".join(re.sub(r"<[^>]+>", " ", item).split())
    assert "tokens/s cpu · ngram k=3 · CPU_ATTN · NONE: 100 → 70 (-29.5 %) from build b4 on (last good b3" in text
    assert "a step fit over 6 builds, still down at b5" in text
    assert 'href="/history?gpu_kind=cpu&amp;method=ngram&amp;backend=CPU_ATTN&amp;graph_mode=NONE"' in item
    assert 'id="regressions-as-of">As of ' in page
    [alert] = client.get("/api/v1/alerts").json()
    assert client.post(f"/api/v1/alerts/{alert['id']}/ack", json={"reason": "expected"}, headers=AUTH).status_code == 200
    assert 'id="regressions-empty"' in _page_once(client, "/", lambda html: 'id="regressions-empty"' in html)


def test_sweep_page_shows_the_matrix_before_any_result(client, dataset) -> None:
    _, sweep = new_sweep(client, sweep_body(dataset, name="matrix-only"))
    response = client.get(f"/sweeps/{sweep['id']}")
    assert response.status_code == 200
    assert "<h1>matrix-only</h1>" in response.text and 'id="sweep-state">queued<' in response.text
    rows = matrix_rows(response.text)
    assert [(r["GPU kind"], r["backend"], r["graph mode"], r["method"], r["runs"], r["states"]) for r in rows] == [
        ("cpu", "CPU_ATTN", "NONE", "draft_model k=3", "2", "queued 2"),
        ("cpu", "CPU_ATTN", "NONE", "ngram k=3", "2", "queued 2"),
    ]
    assert "No cell has finished yet" in response.text and "<svg" not in response.text


def test_sweep_page_draws_the_chart_once_a_result_exists(client, dataset) -> None:
    worker, sweep = new_sweep(client, sweep_body(dataset, name="charted"))
    finish_jobs(client, worker, 1, resolved={"resolved_backend": "CPU_ATTN", "resolved_graph_mode": "NONE"})
    html = client.get(f"/sweeps/{sweep['id']}").text
    ngram = next(r for r in matrix_rows(html) if r["method"] == "ngram k=3")
    # 30 of 60 draft tokens with Wilson's interval; one round of one start gives tokens/s no interval, and says so.
    assert ngram["acceptance [95 %]"] == "0.500 [0.377, 0.623]"
    assert ngram["tokens/s [95 %]"] == "100.01 start × 1 round"
    assert ngram["resolved graph mode"] == "NONE" and ngram["_class"] == ""
    assert ngram["states"] == "queued 1, succeeded 1"
    [chart] = shown.figures(client, html)
    assert chart.figure["id"] == "chart" and "<svg" not in html
    assert chart.img["src"] == f"/sweeps/{sweep['id']}?format=svg&figure=1" and "Throughput per cell" in chart.img["alt"]
    assert "Throughput per cell" in chart.texts()


def test_sweep_page_counts_rounds_per_engine_start(client, dataset) -> None:
    # Two starts of 3 rounds each were once written "2 rep × 6 rounds": the rounds of both starts summed.
    body = sweep_body(dataset, repeats=2, speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    worker, sweep = new_sweep(client, body)
    rounds = [{"seconds": 1.0, "output_tokens": n, "num_requests": 2} for n in (90, 100, 120)]
    for _ in range(2):
        job = claim(client, worker)
        outcome = {"result": cell_result() | {"rounds": rounds}, "exit_code": 0, "duration_s": 12}
        assert complete(client, job["job_id"], worker, outcome).status_code == 200
    [row] = matrix_rows(client.get(f"/sweeps/{sweep['id']}").text)
    assert row["tokens/s [95 %]"].endswith("]2 starts × 3 rounds"), row["tokens/s [95 %]"]
    # /matrix said "2 rep × 6 rounds" of the same cell after the sweep page was fixed: two pages, two counts.
    header, (_, cells) = tables(client.get(f"/matrix?sweep_id={sweep['id']}").text)["cells"]
    speed = dict(zip(header[1], cells, strict=True))["tokens/s [95 %]"]
    assert speed.endswith("]2 starts × 3 rounds"), speed


def test_unknown_sweep_page_is_404_and_an_id_no_row_can_have_422_as_the_api_answers(client) -> None:
    assert client.get("/sweeps/9999").status_code == 404
    for bad in ("0", str(2**31)):
        page, api = client.get(f"/sweeps/{bad}"), client.get(f"/api/v1/sweeps/{bad}")
        assert page.status_code == api.status_code == 422 and "sweep_id" in page.text, bad


def test_a_missing_items_page_links_the_page_that_lists_its_kind(client) -> None:
    page = client.get("/crashes/nope")
    assert page.status_code == 404 and '<a href="/crashes">/crashes</a> lists what there is' in page.text
    assert "<title>crash signature nope not found · draftbench</title>" in page.text
    # /sweeps lists nothing of its own: the overview does.
    assert "The <a href=\"/\">overview</a> lists what there is" in client.get("/sweeps/9999").text


def test_a_downgraded_cell_shows_the_mode_that_ran_and_is_marked(client, dataset) -> None:
    body = sweep_body(dataset, repeats=1, graph_modes=["FULL_AND_PIECEWISE"],
                      speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    worker, sweep = new_sweep(client, body)
    finish_jobs(client, worker, 1, resolved={"resolved_backend": "CPU_ATTN", "resolved_graph_mode": "PIECEWISE", "graph_downgraded": True})
    [row] = matrix_rows(client.get(f"/sweeps/{sweep['id']}").text)
    assert row["graph mode"] == "FULL_AND_PIECEWISE" and row["resolved graph mode"] == "PIECEWISE"
    assert row["_class"] == "fallback"  # red: vLLM ran less than asked, as on /fallback and /matrix


def test_the_demo_sweeps_two_drafts_get_a_label_and_a_row_each(client) -> None:
    # examples/demo-sweep.yaml: two draft_model configs, the target as its own draft and a perturbed copy, once both
    # labelled "draft_model k=3 (demo-cpu-three-drafts)", so the matrix, the chart and the fallback read them as one.
    text = string.Template((ROOT / "examples" / "demo-sweep.yaml").read_text())
    body = yaml.safe_load(text.substitute(MODEL="/var/demo/model", DRAFT="/var/demo/draft-noise-0.03"))
    worker = register_worker(client, builds=(body["build"],))
    response = submit(client, body)
    assert response.status_code == 201, response.text
    finish_jobs(client, worker, 8, resolved={"resolved_backend": "CPU_ATTN", "resolved_graph_mode": "NONE"})
    html = client.get(f"/sweeps/{response.json()['id']}").text
    labels = ["baseline", "draft_model k=3 draft=draft-noise-0.03", "draft_model k=3 draft=model", "ngram k=3"]
    assert [(r["method"], r["runs"]) for r in matrix_rows(html)] == [(label, "2") for label in labels]
    [chart] = shown.figures(client, html)
    assert [t.split(" / ")[-1] for t in chart.texts() if t.startswith("cpu / ")] == labels  # a row each
    fallback = client.get(f"/fallback?sweep_id={response.json()['id']}").text
    assert sorted(cells[2] for _, cells in tables(fallback)["costs"][1:]) == labels[1:]
    assert fallback.count('class="chart"') == 3


# --- a real browser --------------------------------------------------------------------------


@pytest.fixture
def live_server(sqlite_url: str) -> Iterator[str]:
    """The app over SQLite, served by uvicorn in a thread."""
    with serve(Settings(database_url=sqlite_url, token=TOKEN)) as url:
        yield url


def _resolved_as_on_cpu(job: dict) -> dict[str, Any]:
    """What a CPU worker's log would say: full CUDA graphs fall back to piecewise, flagged as a downgrade."""
    requested = job["spec"]["graph_mode"]
    ran = "PIECEWISE" if requested.startswith("FULL") else requested
    return {"resolved_backend": "CPU_ATTN", "resolved_graph_mode": ran, "graph_downgraded": ran != requested}


def test_a_browser_follows_the_sweep_link_and_sees_matrix_and_chart(live_server, chromium, dataset, tmp_path) -> None:
    with httpx.Client(base_url=live_server, timeout=30) as http:
        body = sweep_body(dataset, name="browser-sweep", repeats=1, graph_modes=["NONE", "FULL_AND_PIECEWISE"])
        worker, sweep = new_sweep(http, body)
        jobs = [claim(http, worker) for _ in range(3)]
        for job in jobs:
            outcome = {"result": cell_result(tokens_per_s=80.0 + 20 * job["job_id"]), "resolved": _resolved_as_on_cpu(job), "exit_code": 0}
            assert complete(http, job["job_id"], worker, outcome).status_code == 200

    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{live_server}/")
    page.locator("#sweeps").get_by_role("link", name="browser-sweep").click()
    page.wait_for_url(f"{live_server}/sweeps/{sweep['id']}")

    assert page.locator("h1").inner_text() == "browser-sweep"
    assert page.locator("#sweep-state").inner_text() == "running"
    rows = page.locator("#matrix tr")
    assert rows.count() == 1 + 4  # the header, then 2 methods x 2 graph modes
    cells = [[c.strip() for c in rows.nth(i).locator("td").all_inner_texts()] for i in range(1, 5)]
    assert {(c[2], c[4]) for c in cells} == {(m, s) for m in ("NONE", "FULL_AND_PIECEWISE") for s in ("draft_model k=3", "ngram k=3")}
    assert sorted(c[9] for c in cells) == ["queued 1", "succeeded 1", "succeeded 1", "succeeded 1"]
    # Two of the four cells ask for full graphs and three ran, so at least one ran downgraded.
    downgraded = sum(_resolved_as_on_cpu(job)["graph_downgraded"] for job in jobs)
    assert downgraded >= 1 and page.locator("#matrix tr.fallback").count() == downgraded
    assert page.locator("#matrix tr.fallback").first.locator("td").nth(3).inner_text() == "PIECEWISE"
    chart = page.locator("#chart img")
    assert chart.is_visible() and shown.loaded(chart)["width"] > 300

    shot = tmp_path / "sweep.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def test_a_finished_sweeps_matrix_is_kept_and_its_page_still_shows_a_cancel(client, dataset) -> None:
    worker, sweep = new_sweep(client, sweep_body(dataset, name="kept", repeats=1))
    page = f"/sweeps/{sweep['id']}"
    finish_jobs(client, worker, 1)
    assert sorted(r["states"] for r in matrix_rows(client.get(page).text)) == ["queued 1", "succeeded 1"]
    assert client.app.state.finished_sweeps.get(sweep["id"]) is None  # still running: read afresh each time
    finish_jobs(client, worker, 1)
    finished = client.get(page).text
    assert sorted(r["states"] for r in matrix_rows(finished)) == ["succeeded 1", "succeeded 1"]
    assert client.app.state.finished_sweeps.get(sweep["id"]) is not None
    assert client.post(f"/api/v1/sweeps/{sweep['id']}/cancel", headers=AUTH).status_code == 200
    after = client.get(page).text
    assert 'id="sweep-state">cancelled<' in after and matrix_rows(after) == matrix_rows(finished)


def test_a_browser_shows_the_speedup_matrix_of_a_sweep_whose_baseline_crashed(live_server, chromium, dataset) -> None:
    """The n-gram cell has no speedup (its baseline crashed): a missing value the heatmap once failed on (a 500).
    Under the page's Content-Security-Policy both panels draw, rasters and all, beside the table."""
    with httpx.Client(base_url=live_server, timeout=30) as http:
        worker, sweep = new_sweep(http, sweep_body(dataset, repeats=1, baseline=True,
                                                   speculative=[{"method": "ngram", "num_speculative_tokens": 3}]))
        for job in (claim(http, worker), claim(http, worker)):
            outcome = {"exit_code": 1} if job["spec"]["speculative"] is None else {"result": cell_result(), "exit_code": 0}
            assert complete(http, job["job_id"], worker, outcome).status_code == 200
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    refused: list[str] = []
    page.on("console", lambda message: refused.append(message.text) if "Content Security Policy" in message.text else None)
    response = page.goto(f"{live_server}/matrix?sweep_id={sweep['id']}&metric=speedup")
    assert response.status == 200 and "default-src 'none'" in response.headers["content-security-policy"]
    panels = page.locator("figure.chart img")
    assert panels.count() == 2
    for i in range(2):
        assert panels.nth(i).is_visible() and shown.loaded(panels.nth(i))["width"] > 200
        svg = shown.opened(page, panels.nth(i))
        assert svg.locator("image").first.bounding_box()["width"] > 50  # the grey cell: an embedded data: PNG
        svg.close()
    rows = {r.locator("td").nth(1).inner_text(): r.inner_text() for r in page.locator("#cells tr").all()[1:]}
    assert sorted(rows) == ["baseline", "ngram k=3"] and "crashed 1" in rows["baseline"]
    assert "0.500 [0.377, 0.623]" in rows["ngram k=3"]
    assert refused == []
