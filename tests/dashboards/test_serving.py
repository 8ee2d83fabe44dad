"""``/serving``: its frame over built cells, and the page over the H200 serving sweeps (what it shows must be what
the stored results say), with the matrix's speedups of those sweeps and the page's bad input."""

import csv
import io
import re
from collections import Counter
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.analysis.fallback import RepeatSpeed, pool_repeats, ratio
from app.api.main import create_app
from app.cells import identity
from app.cells.pooling import PooledCell
from app.config import Settings
from app.enums import JobState
from dashboards import marks
from dashboards.data import serving_frame
from dashboards.frames import records
from dashboards.pages.serving import failures
from tests.conftest import TOKEN
from tests.dashboards import shown
from tests.dashboards.h200 import DATA, imported, imported_folder
from tests.dashboards.test_pages import tables

SERVING = ("batch3/h200-serving-8b-shape", "batch2/h200-serving")


def _cell(clients: int, method: str | None, *, model: str = "m", sweep: tuple[int, str] = (1, "s"), speed: float = 100.0,
          failed: int = 0, ttft: float = 20.0, ran: bool = True) -> PooledCell:
    speculative = {"method": method, "num_speculative_tokens": 3} if method else None
    variant = identity.variant({"model": model, "speculative": speculative, "mode": "serve", "concurrency": clients})
    cell = PooledCell("b", "H200", "FLASH_ATTN", "FULL", method, variant, identity.labels([variant])[variant.measured], concurrency=clients,
                      sweep_ids=[sweep[0]], sweep_names=[sweep[1]], job_ids=[1],
                      states=Counter({JobState.SUCCEEDED if ran else JobState.CRASHED: 1}))
    if ran:
        cell.repeats.append(RepeatSpeed(speed, speed * 0.9, speed * 1.1, 3))
        cell.speed = pool_repeats(cell.repeats)
        cell.serving.append({"concurrency": clients, "ttft_ms": {"p50": ttft, "p99": 2 * ttft}, "tpot_ms": {"p50": 5.0},
                             "itl_ms": {"p50": 10.0, "p99": 30.0}, "output_tokens_per_s": speed, "requests_per_s": 1.0,
                             "completed": 100 - failed, "failed": failed})
    else:
        cell.crash_kinds = Counter({"out_of_memory": 1})
    return cell


def _with_speedups(cells: list[PooledCell]) -> list[PooledCell]:
    """The speedups ``app.cells.service.load`` gives: against the baseline of the same measured identity but speculation."""
    bases = {c.identity: c for c in cells if c.method is None}
    for cell in cells:
        base = bases.get(identity.baseline(cell, cell.variant))
        if cell.method and base and cell.speed:
            cell.speedup = ratio(cell.speed, base.speed)
    return cells


def test_the_frame_puts_each_speculative_cell_beside_its_baseline_with_the_same_clients() -> None:
    cells = _with_speedups([
        _cell(4, None, speed=400.0, failed=50), _cell(1, "ngram", speed=150.0, failed=12, ttft=30.0), _cell(1, None, failed=50),
        _cell(4, "ngram", speed=500.0, failed=45), _cell(1, "ngram", model="n", sweep=(2, "other"), speed=90.0),
        _cell(8, "ngram", ran=False),
    ])
    frame = records(serving_frame(cells))
    rows = [(r["concurrency"], r["series"], r["baseline"]) for r in frame]
    # The two n-gram series (models m and n) share a label, so each is named by its sweep.
    assert rows == [(1, "baseline", None), (1, "ngram k=3 (other)", None), (1, "ngram k=3 (s)", "baseline c=1"),
                    (4, "baseline", None), (4, "ngram k=3 (s)", "baseline c=4"), (8, "ngram k=3 (s)", None)]
    by = {(r["concurrency"], r["series"]): r for r in frame}
    one, four, crashed = by[(1, "ngram k=3 (s)")], by[(4, "ngram k=3 (s)")], by[(8, "ngram k=3 (s)")]
    # Against the baseline of its own clients: 150 / 100 at 1 client, 500 / 400 at 4, never 500 / 100.
    assert one["speedup"] == pytest.approx(1.5) and four["speedup"] == pytest.approx(1.25)
    latency = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p99_ms", "starts", "ttft_p50_ms_low")
    assert [one[k] for k in latency] == [30.0, 60.0, None, 1, None]
    # 12 of 100 failed against the baseline's 50 of 100: flagged; 45 against 50 at 4 clients is not.
    assert (one["failed"], one["sent"], one["failed_share"]) == (12, 100, 0.12)
    assert one["failed_vs_baseline"] == pytest.approx(-0.38) and one["failed_differs"]
    assert four["failed_vs_baseline"] == pytest.approx(-0.05) and not four["failed_differs"]
    assert by[(1, "ngram k=3 (other)")]["speedup"] is None  # model n ran no baseline
    assert [crashed[k] for k in ("starts", "died", "crash_kind", "failed", "speedup")] == [0, 1, "out_of_memory", None, None]
    assert serving_frame([]).empty


def test_only_a_runner_that_counted_empty_streams_as_failed_is_said_to_have() -> None:
    """Cells imported from ``vllm bench serve`` leave ``empty`` unknown as our runner before cell schema 5 did, but
    vLLM's tool counts such a stream completed: only the cells our old runner measured get the caution."""
    imported_cell, old_runner = _cell(1, None, failed=10), _cell(4, None, failed=20)
    old_runner.empty_as_failed = 1
    alone = failures(serving_frame([imported_cell]))
    assert alone.startswith("Requests failed in 1 of 1 serving cells") and "cell schema before 5" not in alone
    assert "cell schema before 5" in failures(serving_frame([imported_cell, old_runner]))
    assert failures(serving_frame([_cell(1, None)])) is None


def test_the_runner_at_cell_schema_5_counts_the_h200_empty_streams_as_completed(tmp_path) -> None:
    """The 8B shape's baselines run again on the H200 (2026-12-03, 1 and 16 clients; the session's device time ended
    in the draft's first cell): the 102 of 192 requests that the schema-4 runner counted failed at 1 client now
    complete, empty, and nothing failed, so the page raises no failures headline."""
    url = f"sqlite:///{tmp_path / 'serving.db'}"
    imported_folder(url, DATA / "h200-2026-12-03" / "serving" / "h200-serving-8b-shape-c1-16")
    app = create_app(Settings(database_url=url, token=TOKEN))
    with TestClient(app) as client:
        html = client.get("/serving").text
        rows = list(csv.DictReader(io.StringIO(client.get("/serving?format=csv").text)))
    app.state.engine.dispose()
    by = {int(r["concurrency"]): r for r in rows if r["speculative"] == "False"}
    assert [(by[c]["completed"], by[c]["failed"], by[c]["empty"]) for c in (1, 16)] == [("192", "0", "102"), ("624", "0", "336")]
    assert 'id="failures"' not in html and "completed empty" in html


@pytest.fixture(scope="module")
def h200(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The two H200 serving sweeps imported: the 8B shape at 1, 16 and 64 clients with a baseline (sweep 1), and
    the proof's target at 1 and 16 clients on FLASH_ATTN and FLASHINFER without one (sweep 2)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('serving') / 'serving.db'}"
    imported(url, *SERVING)
    app = create_app(Settings(database_url=url, token=TOKEN))
    with TestClient(app) as client:
        yield client
    app.state.engine.dispose()


COLUMNS = ["series", "clients", "starts", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "TPOT p99 ms", "ITL p50 ms",
           "ITL p99 ms", "tokens/s [95 %]", "tokens/J [95 %]", "speedup [95 %]", "failed, % [95 %]", "runs"]


# What a series' cell says of what ran after its name (``dashboards/templates/marks.html``).
MARKS = re.compile(r"\s*\b(downgraded|draft eager)$")


def _series(text: str) -> tuple[str, tuple[str, ...]]:
    """A series cell's name and the marks after it, in order."""
    marks = []
    while found := MARKS.search(text):
        marks.insert(0, found.group(1))
        text = text[:found.start()]
    return text, tuple(marks)


def _rows(html: str, table: str) -> dict[tuple[str, int], dict[str, str]]:
    """A serving table's rows by (series, clients): its cells by column, the row's class under ``_class`` and the series'
    marks of what ran under ``_marks``."""
    header, *body = tables(html)[table]
    assert header[1] == COLUMNS
    rows = {}
    for cls, cells in body:
        series, marks = _series(cells[0])
        rows[(series, int(cells[1]))] = dict(zip(COLUMNS, [series, *cells[1:]], strict=True)) | {"_class": cls, "_marks": marks}
    return rows


def test_the_page_shows_what_the_stored_results_say(h200: TestClient) -> None:
    html = h200.get("/serving").text
    # FLASH_ATTN's series: the 8B shape's baseline, and two drafts of one label, each named by its sweep.
    stored = {("baseline" if r["method"] is None else f"draft_model k=3 ({r['sweep_name']})", r["concurrency"]): r
              for r in h200.get("/api/v1/results").json() if r["backend"] == "FLASH_ATTN"}
    # Groups in order: FLASHINFER (the proof's target only), then FLASH_ATTN (both sweeps).
    assert re.findall(r'<section class="serving-group" data-title="([^"]+)"', html) == [
        "H200 · FLASHINFER · FULL_AND_PIECEWISE · vllm-0.26.0", "H200 · FLASH_ATTN · FULL_AND_PIECEWISE · vllm-0.26.0"]
    # The serving figures, after the speedup-per-k figures above them (tests/dashboards/test_speedup.py).
    charts = [chart for chart in shown.figures(h200, html) if "TTFT" in chart.img["alt"]]
    assert len(charts) == 2 and "FLASH_ATTN" in charts[1].img["alt"] and "draft_model k=3 (h200-serving)" in charts[1].img["alt"]
    assert "p50 (latencies)" in charts[1].texts()
    rows = _rows(html, "serving-2")
    assert sorted(rows) == sorted(stored)
    for key, result in stored.items():
        row, figures = rows[key], result["serving"]
        for name, field in (("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"), ("ITL", "itl_ms")):
            for percentile in ("p50", "p99"):
                # One engine start a cell: its own value, without an interval.
                assert row[f"{name} {percentile} ms"] == f"{figures[field][percentile]:.2f}", (key, name, percentile)
        assert row["starts"] == "1"
        assert row["tokens/s [95 %]"].startswith(f"{result['tokens_per_s']:.0f} [")
        # Run before cells read energy (cell schema 7): not recorded, never 0, nor said unreported by the GPU.
        assert row["tokens/J [95 %]"] == "not recorded" and result["tokens_per_joule"] is None
        assert result["energy_reason"] is None
        failed, sent = figures["failed"], figures["completed"] + figures["failed"]
        assert f"{failed} of {sent}" in row["failed, % [95 %]"] and row["failed, % [95 %]"].startswith(f"{100 * failed / sent:.1f} [")
        if result["speedup"] is not None:
            assert row["speedup [95 %]"].startswith(f"{result['speedup']:.2f}x [")
    # The 1-client baseline: 102 of 192 requests failed (53.1 %, Wilson [46.1, 60.1]); its draft failed fewer, flagged.
    # Its runner (cell schema 4) counted 200-OK streams of tokens that decoded to no text as failed: the page says so.
    assert rows[("baseline", 1)]["failed, % [95 %]"] == "53.1 [46.1, 60.1] 102 of 192 empty streams counted as failed"
    assert rows[("baseline", 1)]["speedup [95 %]"] == "baseline"
    draft = rows[("draft_model k=3 (h200-serving-8b-shape)", 1)]
    assert draft["_class"] == "alarm" and "-40.6 [-48.6, -31.7] vs base" in draft["failed, % [95 %]"]
    assert rows[("draft_model k=3 (h200-serving)", 1)]["speedup [95 %]"] == "no baseline ran"
    headline = html[html.index('id="failures"'):].split("</p>")[0]
    assert "102 of 192 sent" in headline and "3 speculative cell(s)" in headline and "unequal work" in headline
    assert "cell schema before 5" in headline


def test_the_8b_shape_pays_at_every_clients_measured_and_one_k_cannot_predict(h200: TestClient) -> None:
    [line] = [line for line in h200.get("/api/v1/speedups").json() if any(c["speedup"] for c in line["cells"])]
    # 1.60x [1.40, 1.81], 1.33x [1.11, 1.60], 1.75x [1.54, 1.99] (the test below): every interval above 1.
    assert [e["sentence"] for e in line["break_even"]] == [
        "draft_model k=3 draft=qwen3_0_6b on FLASH_ATTN pays at every load measured (1 to 64 clients)"]
    assert line["best"][0]["sentence"] == "best k: 3 at 1 client (1.60x [1.40, 1.81]); only k=3 ran here"
    assert line["one_k"] == [1, 16, 64] and all(c["predicted_speedup"] is None for c in line["cells"])
    html = h200.get("/serving").text
    assert "pays at every load measured (1 to 64 clients)" in html and "needs two k: one alone ran at 1, 16, 64 clients" in html


def test_the_speedups_are_against_the_baseline_with_the_same_clients(h200: TestClient) -> None:
    rows = _rows(h200.get("/serving").text, "serving-2")
    # /api/v1/results: 1.596 at 1 client, 1.332 at 16, 1.754 at 64.
    speedups = {c: rows[("draft_model k=3 (h200-serving-8b-shape)", c)]["speedup [95 %]"] for c in (1, 16, 64)}
    # vLLM 0.26 turned async scheduling off for these draft_model cells ("Async scheduling not supported with
    # draft_model-based speculative decoding"), not for their baselines: each speedup is marked.
    sync = " sync scheduling"
    assert speedups == {1: f"1.60x [1.40, 1.81]{sync}", 16: f"1.33x [1.11, 1.60]{sync}", 64: f"1.75x [1.54, 1.99]{sync}"}
    api = {r["concurrency"]: round(r["speedup"], 3) for r in h200.get("/api/v1/results").json()
           if r["sweep_name"] == "h200-serving-8b-shape" and r["method"]}
    assert api == {1: 1.596, 16: 1.332, 64: 1.754}
    # A method filter keeps the baselines its cells are shown beside.
    filtered = _rows(h200.get("/serving?method=draft_model&backend=FLASH_ATTN").text, "serving-1")
    assert filtered[("draft_model k=3 (h200-serving-8b-shape)", 16)]["speedup [95 %]"] == speedups[16]
    assert ("baseline", 16) in filtered


def test_the_csv_is_the_table_behind_the_figures(h200: TestClient) -> None:
    response = h200.get("/serving?format=csv&sweep_id=1")
    assert response.headers["content-type"].startswith("text/csv")
    rows = {r["method"]: r for r in csv.DictReader(io.StringIO(response.text))}
    assert sorted(rows) == ["baseline c=1", "baseline c=16", "baseline c=64", "draft_model k=3 c=1", "draft_model k=3 c=16",
                            "draft_model k=3 c=64"]
    base = rows["baseline c=1"]
    assert (base["failed"], base["sent"], float(base["failed_share"])) == ("102", "192", 102 / 192)
    assert float(base["ttft_p50_ms"]) == 18.27024499999652 and base["ttft_p50_ms_low"] == ""
    assert rows["draft_model k=3 c=16"]["baseline"] == "baseline c=16"
    assert float(rows["draft_model k=3 c=16"]["speedup"]) == pytest.approx(1.3321549078147819)


def test_the_matrix_of_the_serving_sweep_gives_each_concurrency_its_speedup(h200: TestClient) -> None:
    """Each panel a label, so a concurrency: the drafts' read their speedups, the baselines' say they are the baseline
    (they read "no data" beside a serving sweep's speedups)."""
    html = h200.get("/matrix?sweep_id=1&metric=speedup").text
    panels = {figure.title: figure.texts() for figure in shown.figures(h200, html)}
    written = {title.split(" · ")[1]: [t for t in texts if t.endswith("x") or t in ("baseline", "no data", "no baseline ran")]
               for title, texts in panels.items()}
    assert written == {
        "baseline c=1": ["baseline"], "baseline c=16": ["baseline"], "baseline c=64": ["baseline"],
        "draft_model k=3 c=1": ["1.60x"], "draft_model k=3 c=16": ["1.33x"], "draft_model k=3 c=64": ["1.75x"]}
    # With a method filter the baselines are still read, for the speedups.
    answer = h200.get("/matrix?sweep_id=1&method=draft_model&format=csv").text
    filtered = {r["method"]: round(float(r["speedup"]), 3) for r in csv.DictReader(io.StringIO(answer))}
    assert filtered == {"draft_model k=3 c=1": 1.596, "draft_model k=3 c=16": 1.332, "draft_model k=3 c=64": 1.754}


def test_a_filter_that_matches_no_serving_cell_says_so(h200: TestClient) -> None:
    html = h200.get("/serving?build=vllm-9").text
    assert 'id="empty"' in html and "mode: serve" in html and 'id="failures"' not in html
    # Its CSV is the table's header row alone: a spreadsheet still reads what the columns are.
    [header] = h200.get("/serving?build=vllm-9&format=csv").text.strip().splitlines()
    assert header.startswith("build,gpu_kind,backend,graph_mode,resolved_graph_mode,downgraded,draft_eager,")


def test_starts_of_the_runner_before_cell_schema_5_never_pool_with_todays(tmp_path) -> None:
    """``batch3``'s 8B-shape sweep (2026-11-30, the schema-4 runner: its empty streams counted failed) and the baselines
    run again at schema 5 (2026-12-03, 1 and 16 clients) measured one config: each runner's starts are a cell of their
    own, and the old draft's speedup is against the old baseline alone (142 / 89 tok/s at 1 client), never the new."""
    url = f"sqlite:///{tmp_path / 'runners.db'}"
    imported(url, "batch3/h200-serving-8b-shape")
    imported_folder(url, DATA / "h200-2026-12-03" / "serving" / "h200-serving-8b-shape-c1-16")
    app = create_app(Settings(database_url=url, token=TOKEN))
    with TestClient(app) as client:
        lines = client.get("/api/v1/speedups?mode=serve").json()
        results = {r["job_id"]: r for r in client.get("/api/v1/results").json()}
        html = client.get("/serving").text
    app.state.engine.dispose()
    [old] = lines
    assert "empty streams failed" in old["name"]
    for cell in old["cells"]:
        # Each old start's baseline is the old sweep's own, at its clients.
        [base] = cell["baseline_jobs"]
        assert results[base]["sweep_id"] == results[cell["jobs"][0]]["sweep_id"]
        assert cell["speedup"] == pytest.approx(results[cell["jobs"][0]]["speedup"])
    assert [round(c["speedup"], 2) for c in old["cells"]] == [1.6, 1.33, 1.75]
    assert "counting=empty streams failed (runner before cell schema 5)" in html
    # The line says what its runner left out, above its figure as in the API.
    assert old["counting"].startswith("Measured by the serving runner before cell schema 5")
    assert 'class="counting warnings">Measured by the serving runner before cell schema 5' in html


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_a_section_titled_by_the_mode_asked_says_that_vllm_ran_another_and_the_draft_eager(h200: TestClient) -> None:
    """The proof's FLASHINFER cells asked FULL_AND_PIECEWISE; vLLM ran them PIECEWISE with the draft eager. The section
    titled by the mode asked says what ran, and each row bears /matrix's marks in its colour (red: ran less than asked);
    the speedup line, titled by the mode that ran, says what was asked."""
    html = h200.get("/serving").text
    section = html[html.index('data-title="H200 · FLASHINFER · FULL_AND_PIECEWISE'):].split("</section>")[0]
    said = ("Not what was asked: 2 of 2 cells asked FULL_AND_PIECEWISE and vLLM ran PIECEWISE (downgraded); the draft ran "
            "without CUDA graphs in 2 of 2 cells with a draft (draft eager). Their numbers measure what ran.")
    assert said in _text(section)
    rows = _rows(html, "serving-1")
    assert {key: (row["_marks"], row["_class"]) for key, row in rows.items()} == {
        ("draft_model k=3", 1): (("downgraded", "draft eager"), "fallback"),
        ("draft_model k=3", 16): (("downgraded", "draft eager"), "fallback")}
    assert '<span class="badge downgraded" title="asked FULL_AND_PIECEWISE; vLLM ran PIECEWISE">downgraded</span>' in section
    [line] = [part.split("</section>")[0] for part in html.split('<section class="speedup-line"')[1:]
              if "FLASHINFER · PIECEWISE" in part.split(">")[0]]
    assert said in _text(line) and _text(line).count("downgraded draft eager") == 2
    assert len(re.findall(r"FULL_AND_PIECEWISE sweep \d+ log \d+", _text(line))) == 2  # each row's mode asked
    # FLASH_ATTN ran the mode it asked, its draft eager beside the target's graphs: said, and marked on its drafts alone.
    flash = _text(html[html.index('data-title="H200 · FLASH_ATTN · FULL_AND_PIECEWISE'):].split("</section>")[0])
    assert "Not what was asked: the draft ran without CUDA graphs in 5 of 5 cells with a draft (draft eager)." in flash
    marked = {key: row["_marks"] for key, row in _rows(html, "serving-2").items()}
    assert {marks for (series, _), marks in marked.items() if series == "baseline"} == {()}
    assert {marks for (series, _), marks in marked.items() if series != "baseline"} == {("draft eager",)}


def test_log_links_go_to_the_jobs_that_ran_and_the_baseline_is_linked_beside_the_cell(h200: TestClient) -> None:
    """A queued job has no log (404): a row links the jobs whose results it pooled, and a speedup its baseline's too."""
    html = h200.get("/serving").text
    links = set(re.findall(r'href="(/api/v1/jobs/\d+/log)"', html))
    ran = {r["job_id"] for r in h200.get("/api/v1/results").json()}
    assert links and {int(link.split("/")[4]) for link in links} <= ran
    assert all(h200.get(link).status_code == 200 for link in links)
    line = html[html.index('<section class="speedup-line"'):].split("</section>")[0]
    assert "baseline: sweep" in _text(line)


def test_the_matrix_marks_a_cell_as_every_other_page_does(h200: TestClient) -> None:
    """/matrix writes its marks out (a call per cell of thousands costs it); they are ``dashboards.marks.badges``'s."""
    html = h200.get("/matrix?backend=FLASHINFER").text
    cell = next(row for row in html.split("<tr")[1:] if "FULL_AND_PIECEWISE" in row and "draft_model" in row)
    shown = re.findall(r'<span class="badge(?: downgraded| eager| sync)?"[^>]*>[^<]*</span>', cell)
    assert " ".join(shown) + " " == str(marks.badges("FULL_AND_PIECEWISE", "PIECEWISE", True, True, 1))
    serving = h200.get("/serving?backend=FLASHINFER").text
    assert str(marks.badges("FULL_AND_PIECEWISE", "PIECEWISE", True, True)) in serving
