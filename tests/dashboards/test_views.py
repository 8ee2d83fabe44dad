"""The analysis pages over the real H200 data, rendered by the server: what each shows, its filters, its CSV."""

import csv
import html as html_lib
import io
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.conftest import AUTH
from tests.dashboards import shown
from tests.dashboards.h200 import DATA, MATRIX, copy_of, imported, imported_folder, in_process
from tests.dashboards.test_pages import tables

PAGES = ["/", "/fallback", "/matrix", "/serving", "/alarms", "/compare", "/history", "/calibration", "/crashes", "/noise"]


@pytest.fixture(scope="module")
def h200(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The H200 matrix (3 backends x 4 graph modes x draft_model/dflash, 5 rounds a cell), imported from its two
    sweeps' folders: 24 cells, 3 of the first sweep's left unrun when its lease ended."""
    url = f"sqlite:///{tmp_path_factory.mktemp('h200') / 'h200.db'}"
    imported(url, *MATRIX)
    yield from in_process(url)


@pytest.fixture(scope="module")
def every_sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """Every exported H200 sweep imported (``tests/data/h200-2026-11-30``), as a user imports them."""
    url = f"sqlite:///{tmp_path_factory.mktemp('every') / 'all.db'}"
    imported(url)
    yield from in_process(url)


def _sweep_ids(client: TestClient) -> dict[str, list[int]]:
    ids: dict[str, list[int]] = {}
    for sweep in client.get("/api/v1/sweeps").json():
        ids.setdefault(sweep["name"], []).append(sweep["id"])
    return {name: sorted(found) for name, found in ids.items()}


@pytest.fixture(scope="module")
def capture_bug(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    yield from in_process(copy_of("capture-bug", tmp_path_factory.mktemp("capture")))


def test_fallback_names_the_most_expensive_fallback_first(h200: TestClient) -> None:
    html = h200.get("/fallback").text
    headline = html[html.index('id="headline"'):].split("</p>")[0]
    # FLASHINFER downgraded FULL_AND_PIECEWISE to PIECEWISE and left the DFlash draft eager: 3574 / 8711 tokens/s,
    # each the median of 5 rounds, whose order-statistic intervals give the ratio's.
    assert "FLASHINFER, dflash k=3 draft eager, target PIECEWISE (asked FULL_AND_PIECEWISE): 0.41x [0.36, 0.47]" in headline
    assert "of FLASH_ATTN with FULL_AND_PIECEWISE" in headline and "no interval" not in headline
    _, first, *_ = tables(html)["costs"]
    assert first[0] == "fallback" and first[1][:5] == ["vllm-0.26.0", "H200", "dflash k=3", "FLASHINFER", "FULL_AND_PIECEWISE"]
    # One start: its rounds' range, 3373-3805 at 93.75 %, carried to 95 % on each side (fallback.repeat_interval).
    assert first[1][7] == "3574 [3362, 3817]1 start · 5 rounds"
    assert html.count('class="chart"') == 2  # DFlash and draft_model on the H200


def test_fallback_says_which_graph_mode_each_draft_ran(h200: TestClient) -> None:
    # Drafts of graph-mode-NONE cells read "graphed" here while the API said their draft ran NONE.
    header, *rows = tables(h200.get("/fallback").text)["costs"]
    assert header[1][4:7] == ["graph mode asked", "ran", "draft"]
    drafts = {(cells[4], cells[6]) for _, cells in rows}
    assert ("NONE", "NONE") in drafts and not any(asked == "NONE" and draft != "NONE" for asked, draft in drafts)
    assert ("FULL_AND_PIECEWISE", "FULL") in drafts and ("FULL_AND_PIECEWISE", "draft eager") in drafts
    answered = {r["resolved_draft_graph_mode"] for r in h200.get("/api/v1/results").json() if r["graph_mode"] == "NONE" and r["method"]}
    assert answered == {"NONE"}


def test_the_imported_matrix_reads_finished_with_its_unrun_cells_not_run(h200: TestClient) -> None:
    sweeps = {cells[1]: cells for _, cells in tables(h200.get("/").text)["sweeps"][1:]}
    assert sweeps["h200-matrix"][3:6] == ["H200", "finished", "not run 3, succeeded 21"]


def test_fallback_of_the_proof_has_intervals_from_the_rounds(tmp_path: Path) -> None:
    for client in in_process(copy_of("proof", tmp_path)):
        html = client.get("/fallback?build=vllm-0.26.0&method=dflash").text
        assert "0.41x [0.36, 0.47] of FLASH_ATTN with FULL_AND_PIECEWISE" in html


def test_every_exported_h200_sweep_imports_with_what_it_ran(every_sweep: TestClient) -> None:
    for client in [every_sweep]:
        sweeps = sorted((cells[1], cells[5]) for _, cells in tables(client.get("/").text)["sweeps"][1:])
        # Jobs the lease cut short import as not run, beside those that never started; batch 3 ran a sweep of
        # batch 2 again (the A/A repeats, the 8B shape) with a whole pass as warm-up.
        assert sweeps == [("h200-calibration-t1", "succeeded 4"), ("h200-capture-bug", "succeeded 3"),
                          ("h200-fallback-repeats", "not run 11, succeeded 1"),
                          ("h200-fallback-repeats", "succeeded 12"), ("h200-matrix", "not run 3, succeeded 21"),
                          ("h200-matrix-rest", "succeeded 4"), ("h200-peer-alone", "succeeded 1"),
                          ("h200-peer-throughput", "succeeded 2"), ("h200-qwen3-8b-shape", "succeeded 4"),
                          ("h200-qwen3-8b-shape", "succeeded 4"), ("h200-serving", "succeeded 4"),
                          ("h200-serving-8b-shape", "succeeded 6")]
        results = client.get("/api/v1/results").json()
        # Batch 4's calibration at temperature 1, every pass drawing anew: no position missed.
        calibration = [r for r in results if r["sweep_name"] == "h200-calibration-t1"]
        assert len(calibration) == 4 and not any(r["calibration_miss"] for r in calibration)
        serving = {(r["backend"], r["concurrency"]): r for r in results
                   if r["mode"] == "serve" and r["sweep_name"] == "h200-serving"}
        assert sorted(serving) == [("FLASHINFER", 1), ("FLASHINFER", 16), ("FLASH_ATTN", 1), ("FLASH_ATTN", 16)]
        for backend in ("FLASH_ATTN", "FLASHINFER"):
            one, sixteen = serving[(backend, 1)], serving[(backend, 16)]
            assert sixteen["tokens_per_s"] > 10 * one["tokens_per_s"] and sixteen["rounds"] == one["rounds"] == 3
            assert one["serving"]["ttft_ms"]["p50"] < sixteen["serving"]["ttft_ms"]["p50"]


def test_the_capture_bug_is_flagged_on_the_alarms_page_the_matrix_and_the_api(capture_bug: TestClient) -> None:
    html = capture_bug.get("/alarms").text
    rows = tables(html)["alarm-table"][1:]
    assert sorted(cells[4].split(" (")[0] for _, cells in rows) == ["FULL_AND_PIECEWISE", "FULL_DECODE_ONLY"]
    assert all(cells[5].startswith("0.910") and cells[6].startswith("1.000") for _, cells in rows)
    matrix = capture_bug.get("/matrix?build=vllm-0.26.0-fi-full").text
    assert matrix.count("alarm: acceptance") == 2 and "degenerate 1.000" in matrix
    api = capture_bug.get("/api/v1/alarms").json()
    assert [(a["graph_mode"], round(a["value"], 3), a["eager_value"]) for a in api] == [
        ("FULL_DECODE_ONLY", 0.91, 1.0), ("FULL_AND_PIECEWISE", 0.91, 1.0)]
    assert api[0]["difference_low"] < api[0]["difference"] < api[0]["difference_high"] < -0.02
    results = capture_bug.get("/api/v1/results?build=vllm-0.26.0-fi-full").json()
    assert {r["graph_mode"]: (r["alarm"], r["degenerate"]) for r in results} == {
        "NONE": ([], True), "FULL_DECODE_ONLY": (["acceptance"], False), "FULL_AND_PIECEWISE": (["acceptance"], False)}


def test_a_higher_minimum_effect_silences_the_alarm(capture_bug: TestClient) -> None:
    assert capture_bug.get("/api/v1/alarms?min_effect=0.2").json() == []
    assert "No alarm" in capture_bug.get("/alarms?min_effect=0.2").text


def test_matrix_marks_degenerate_drafts_and_toggles_its_metric(h200: TestClient) -> None:
    html = h200.get("/matrix?method=dflash").text
    # The random DFlash draft guesses nothing right in any of its 12 cells.
    assert html.count("degenerate 0.000") == 12 and "colorbar" not in html  # the legend is drawn, not named
    assert "<strong>acceptance rate" in html
    toggled = h200.get("/matrix?method=dflash&metric=tokens_per_s").text
    assert "<strong>output tokens/s" in toggled and toggled.count('class="chart"') == 1


def test_filters_change_what_is_shown(h200: TestClient) -> None:
    every = tables(h200.get("/matrix").text)["cells"][1:]
    flashinfer = tables(h200.get("/matrix?backend=FLASHINFER").text)["cells"][1:]
    assert len(every) == 24 and len(flashinfer) == 8
    assert {cells[2] for _, cells in flashinfer} == {"FLASHINFER"}


def test_every_page_has_a_csv(h200: TestClient) -> None:
    for page in ["/fallback", "/matrix", "/serving", "/alarms", "/history"]:
        response = h200.get(f"{page}?format=csv")
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv"), page
    header = h200.get("/matrix?format=csv").text.splitlines()[0].split(",")
    assert {"acceptance_low", "tokens_per_s_high", "repeats", "rounds", "vllm_version", "jobs"} <= set(header)


def test_compare_a_sweep_with_itself_is_unchanged_everywhere(h200: TestClient) -> None:
    rows = tables(h200.get("/compare?base=1&head=1").text)["changes"][1:]
    # The lease ended with 3 of the matrix's 24 cells unfinished (2 cut while running, 1 never started): nothing
    # was measured there on either side, so they are pending, never "unchanged".
    verdicts = Counter(cells[0] for _, cells in rows)
    assert len(rows) == 24 and verdicts == {"unchanged": 21, "pending": 3}
    pending = {(cells[2], cells[3], cells[4], cells[15]) for _, cells in rows if cells[0] == "pending"}
    assert pending == {("dflash k=3", "TRITON_ATTN", "FULL_AND_PIECEWISE", "not finished → not finished"),
                       ("dflash k=3", "TRITON_ATTN", "FULL_DECODE_ONLY", "not finished → not finished"),
                       ("draft_model k=3", "TRITON_ATTN", "FULL_AND_PIECEWISE", "not finished → not finished")}


def test_compare_the_matrix_with_the_sweep_that_finished_it(h200: TestClient) -> None:
    # Sweep 2 ran the last 4 TRITON_ATTN cells again: 3 that sweep 1 left unrun, 1 that ran in both.
    rows = {(cells[2], cells[4]): cells for _, cells in tables(h200.get("/compare?base=1&head=2").text)["changes"][1:]}
    assert len(rows) == 4
    both = rows[("draft_model k=3", "FULL_DECODE_ONLY")]
    # Each one start's rounds, 1542-5276 and 1996-6112 (a slow first round each), carried to 95 % side by side.
    assert both[0] == "undecided" and both[5:7] == ["4810 [1453, 5301]", "5893 [1886, 6124]"]
    # The H200 noise model (this import's A/A: few starts that spread widely) leaves one start a side far from a call.
    assert "(noise model, 95 %)" in both[16] and "too few starts to call" in both[16] and both[8].endswith(" %")
    # Run before cells read energy: each side's tokens/J not recorded (never 0, nor said unreported), and no ratio.
    assert both[9:12] == ["not recorded", "not recorded", ""]
    assert all(cells[5] == "—" for key, cells in rows.items() if key != ("draft_model k=3", "FULL_DECODE_ONLY"))


def test_history_of_one_cell_links_each_point_to_its_run(h200: TestClient) -> None:
    html = h200.get("/history?gpu_kind=H200&method=dflash&backend=FLASHINFER&graph_mode=FULL_DECODE_ONLY").text
    [_, (_, cells)] = tables(html)["points"]
    assert cells[1] == "vllm-0.26.0" and "2,926" not in cells[5] and cells[5].startswith("2926 [2759, 3181]")
    assert 'href="/sweeps/1"' in html and 'id="history-chart"' in html


@pytest.mark.parametrize("page", PAGES)
def test_every_page_shows_its_empty_state_on_an_empty_database(client: TestClient, page: str) -> None:
    response = client.get(page)
    assert response.status_code == 200
    assert 'id="empty"' in response.text or "No sweep yet" in response.text


def test_the_pages_show_run_facts(h200: TestClient) -> None:
    for page in ["/fallback", "/matrix", "/alarms", "/history"]:
        facts = tables_free_text(h200.get(page).text)
        assert "vLLM" in facts and "0.26.0" in facts and "H200" in facts and "2026-11-30" in facts, page


def tables_free_text(html: str) -> str:
    return html[html.index('id="facts"'):].split("</dl>")[0]


def test_a_submitted_form_with_every_field_blank_is_no_filter(h200: TestClient) -> None:
    # A GET form sends every field; the blank ones once failed their bounds check on None (a 500).
    blank = "sweep_id=&build=&gpu_kind=&method=&backend=&graph_mode="
    for page in ["/matrix", "/fallback", "/serving", "/alarms?min_effect=", "/history", "/calibration", "/crashes", "/compare?base=&head="]:
        response = h200.get(f"{page}{'&' if '?' in page else '?'}{blank}")
        assert response.status_code == 200, (page, response.text[:300])


def test_history_runs_in_commit_order_once_every_build_has_its_commit_date(tmp_path: Path) -> None:
    """The capture-bug build ran after the unpatched one; registered as committed earlier, it comes first."""
    cell = "/history?gpu_kind=H200&method=draft_model&backend=FLASHINFER&graph_mode=FULL_DECODE_ONLY"
    for client in in_process(copy_of("capture-bug", tmp_path)):
        def builds(client: TestClient = client) -> list[tuple[str, str]]:
            [_, *rows] = tables(client.get(cell).text)["points"]
            return [(cells[1], cells[2].split(" (", 1)[1].rstrip(")")) for _, cells in rows]

        assert builds() == [("vllm-0.26.0", "first ran"), ("vllm-0.26.0-fi-full", "first ran")]
        dates = {"vllm-0.26.0": "2026-11-20T09:00:00+00:00", "vllm-0.26.0-fi-full": "2026-11-10T09:00:00Z"}
        answer = client.post("/api/v1/workers", headers=AUTH, json={
            "name": "w", "host": "h", "gpu_kinds": ["H200"],
            "builds": [{"label": label, "committed_at": when} for label, when in dates.items()]})
        assert answer.status_code == 201, answer.text
        assert builds() == [("vllm-0.26.0-fi-full", "committed"), ("vllm-0.26.0", "committed")]
        # The same date again is no conflict; another is (a build's facts are written once).
        build = {"label": "vllm-0.26.0", "committed_at": dates["vllm-0.26.0"]}
        again = {"name": "w", "host": "h", "gpu_kinds": ["H200"], "builds": [build]}
        assert client.post("/api/v1/workers", headers=AUTH, json=again).status_code == 201
        again["builds"][0]["committed_at"] = "2026-11-21T09:00:00+00:00"
        assert client.post("/api/v1/workers", headers=AUTH, json=again).status_code == 409


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+01:00", "1999-12-31T23:59:59Z", "9999-12-31T23:59:59-01:00", "2999-01-01T00:00:00Z"])
def test_a_commit_date_no_clock_could_show_is_refused_naming_it(client: TestClient, when: str) -> None:
    # 0001-01-01 in a zone east of UTC lies before year 1 in UTC: it answered 500.
    body = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "b", "committed_at": when}]}
    answer = client.post("/api/v1/workers", headers=AUTH, json=body)
    assert answer.status_code == 422, answer.text
    [error] = answer.json()["detail"]
    assert error["loc"][-1] == "committed_at" and "not a plausible time" in error["msg"]


def test_a_commit_date_without_its_zone_is_refused(client: TestClient) -> None:
    body = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "b", "committed_at": "2026-11-20T09:00:00"}]}
    answer = client.post("/api/v1/workers", headers=AUTH, json=body)
    assert answer.status_code == 422 and "committed_at" in answer.text


def test_fallback_pools_three_engine_starts_of_the_h200_repeats(tmp_path: Path) -> None:
    """batch3's A/A sweep: 3 engine starts x 5 rounds of each cell; the fallback's interval spans the starts."""
    url = f"sqlite:///{tmp_path / 'repeats.db'}"
    imported(url, "batch3/h200-fallback-repeats")
    for client in in_process(url):
        html = client.get("/fallback?method=dflash").text
        _, first, *_ = tables(html)["costs"]
        # The starts' medians 3994, 3944 and 4436 tokens/s: the between-start spread sets the interval, wider
        # than any one start's rounds give; against FLASH_ATTN's 7969-8452.
        assert first[1][3:8] == ["FLASHINFER", "FULL_AND_PIECEWISE", "PIECEWISE downgraded", "draft eager",
                                 "3994 [3713, 4297]3 starts · 15 rounds"]
        assert first[1][8].startswith("0.48x [0.43, 0.53]")


# The FLASHINFER DFlash cell asked FULL_AND_PIECEWISE ran PIECEWISE with its draft eager in 4 engine starts: the matrix's
# one (3574 tok/s) and batch 3's three (3994, 3944, 4436), median 3969; FLASH_ATTN's four (8711; 8380, 7969, 8452) have
# median 8416: 3969 / 8416 = 0.47. The matrix's start alone read 0.41x, batch 3's three alone 0.48x.
POOLED = "0.47x [0.42, 0.52] of FLASH_ATTN with FULL_AND_PIECEWISE (4 engine starts, 20 rounds, against 4 starts, 20 rounds)"
POOLED_CELL = "FLASHINFER, dflash k=3 draft eager, target PIECEWISE (asked FULL_AND_PIECEWISE): "


def _headline(html: str) -> str:
    return " ".join(html[html.index('id="headline"'):].split("</p>")[0].split())


def test_the_fallback_headline_pools_every_engine_start_whatever_the_filter_shows(every_sweep: TestClient) -> None:
    # A filter picks the rows, never the references: FLASHINFER alone read 1.00x of itself, and the matrix's sweep
    # read its one start (0.41x).
    matrix = _sweep_ids(every_sweep)["h200-matrix"][0]
    for query in ["", "?backend=FLASHINFER", "?backend=FLASHINFER&graph_mode=FULL_AND_PIECEWISE", "?method=dflash",
                  f"?sweep_id={matrix}", "?build=vllm-0.26.0&gpu_kind=H200"]:
        html = every_sweep.get(f"/fallback{query}").text
        assert POOLED_CELL + POOLED in _headline(html), query
        _, first, *_ = tables(html)["costs"]
        assert first[1][7:9] == ["3969 [3640, 4328]4 starts · 20 rounds", "0.47x [0.42, 0.52]of FLASH_ATTN"], query
    rows = tables(every_sweep.get("/fallback?backend=FLASHINFER").text)["costs"][1:]
    assert {cells[3] for _, cells in rows} == {"FLASHINFER"} and "n/a" not in {cells[8] for _, cells in rows}


def test_the_fallback_csv_gives_each_cost_its_interval_and_reference(every_sweep: TestClient) -> None:
    rows = list(csv.DictReader(io.StringIO(every_sweep.get("/fallback?format=csv").text)))
    first = rows[0]
    assert (first["method"], first["backend"], first["graph_mode"]) == ("dflash k=3", "FLASHINFER", "FULL_AND_PIECEWISE")
    assert [round(float(first[f"cost_vs_requested{end}"]), 2) for end in ("", "_low", "_high")] == [0.47, 0.42, 0.52]
    assert (first["requested_backend"], first["requested_graph_mode"]) == ("FLASH_ATTN", "FULL_AND_PIECEWISE")
    assert first["repeats"] == first["requested_repeats"] == "4"
    # Every cell that ran has its cost against the best cell with an interval (each ran 3 or more rounds).
    assert all(r["cost_vs_best"] and r["cost_vs_best_low"] and r["cost_vs_best_high"] and r["best_backend"] for r in rows)


def test_a_fallback_row_that_is_its_own_reference_reads_the_reference_not_a_ratio_with_an_interval(
        h200: TestClient) -> None:
    # DFlash on FLASH_ATTN FULL_AND_PIECEWISE is the fastest cell of its config and the fastest that ran that mode as
    # asked: it read "1.00x [0.75, 1.33] of FLASH_ATTN", a ratio of the cell to itself with the interval of two
    # independent cells, as if it might cost a quarter of its speed against itself.
    header, *rows = tables(h200.get("/fallback").text)["costs"]
    assert header[1][8:10] == ["cost vs (a) mode as requested", "cost vs (b) best"]
    [own] = [cells for _, cells in rows if cells[2:5] == ["dflash k=3", "FLASH_ATTN", "FULL_AND_PIECEWISE"]]
    assert own[8:10] == ["the referencethe fastest whose target ran FULL_AND_PIECEWISE as asked",
                         "the referencethe fastest cell of its config"]
    # So is draft_model's on FLASH_ATTN FULL_AND_PIECEWISE; every other row is measured against another cell.
    best = {tuple(cells[2:5]) for _, cells in rows if cells[9].startswith("the reference")}
    assert best == {("dflash k=3", "FLASH_ATTN", "FULL_AND_PIECEWISE"), ("draft_model k=3", "FLASH_ATTN", "FULL_AND_PIECEWISE")}
    assert all(cells[9].startswith(("0.", "1.")) and "of FLASH_ATTN" in cells[9] for _, cells in rows
               if tuple(cells[2:5]) not in best)
    [line] = [r for r in csv.DictReader(io.StringIO(h200.get("/fallback?format=csv").text))
              if (r["method"], r["backend"], r["graph_mode"]) == ("dflash k=3", "FLASH_ATTN", "FULL_AND_PIECEWISE")]
    assert [line[f"cost_vs_{name}{end}"] for name in ("requested", "best") for end in ("", "_low", "_high")] == ["1.0"] * 6


def test_every_fallback_figure_draws_each_of_its_cells_in_a_row_of_its_own(every_sweep: TestClient) -> None:
    # Batch 4's two calibration configs once shared a label, and their four cells were drawn into two rows: a bar
    # reaching 14,703 labelled 9,183.
    html = every_sweep.get("/fallback").text
    rows = Counter((cells[2], cells[3], cells[4]) for _, cells in tables(html)["costs"][1:])
    speeds = {(cells[2], cells[3], cells[4]): int(cells[7].split()[0]) for _, cells in tables(html)["costs"][1:]}
    figures = shown.figures(every_sweep, html)
    titles = [figure.title for figure in figures]
    assert len(set(titles)) == len(titles) and sum("synthetic_acceptance_rates" in t for t in titles) == 2
    drawn: Counter = Counter()
    for title, figure in zip(titles, figures, strict=True):
        _, label, _ = title.split(" · ")
        names = [t for t in figure.texts() if re.fullmatch(r"[A-Z_]+ / [A-Z_]+( -> [A-Z_]+)?", t)]  # a row's name
        bars = figure.bars()
        assert len(bars) == len(names), (title, names, bars)
        for name, drawn_speed in zip(names, bars, strict=True):
            backend, mode = name.split(" -> ")[0].split(" / ")
            drawn[(label, backend, mode)] += 1
            # Each bar as long as its row's tokens/s in the table (which writes it to the unit).
            assert drawn_speed == pytest.approx(speeds[(label, backend, mode)], abs=1), (title, name)
    assert drawn == rows


def test_history_draws_each_calibration_config_as_its_own_series(every_sweep: TestClient) -> None:
    # Two synthetic acceptance configs of one sweep (0.8/0.5/0.3 and 0.9/0.6/0.2): acceptance 0.532 and 0.566 on
    # FLASH_ATTN, read as one series they made a change point between two configs, not two builds.
    sweep = _sweep_ids(every_sweep)["h200-calibration-t1"][0]
    html = every_sweep.get(f"/history?sweep_id={sweep}&backend=FLASH_ATTN").text
    points = tables(html)["points"][1:]
    assert [cells[0] for _, cells in points] == [f"H200 draft_model k=3 synthetic_acceptance_rates={r} FLASH_ATTN FULL_AND_PIECEWISE"
                                                 for r in ("[0.8, 0.5, 0.3]", "[0.9, 0.6, 0.2]")]
    assert [cls for cls, _ in points] == ["", ""] and "badge alarm" not in html
    [chart] = shown.figures(every_sweep, html)
    assert chart.figure["id"] == "history-chart"
    legend = chart.texts()
    assert sum("synthetic_acceptance_rates" in t for t in legend) == 2


def test_compare_of_two_sweeps_that_share_no_cell_names_the_fields_that_differ(every_sweep: TestClient) -> None:
    ids = _sweep_ids(every_sweep)
    base, head = ids["h200-qwen3-8b-shape"][0], ids["h200-calibration-t1"][0]
    said = ("Every base cell differs from every head cell in speculative.model: qwen3_8b vs target; "
            "speculative.rejection_sample_method: none vs synthetic; "
            "speculative.synthetic_acceptance_rates: none vs [0.8, 0.5, 0.3], [0.9, 0.6, 0.2]; model: qwen3_8b vs target; "
            "workload.dataset: draftbench vs random; workload.input_len: none vs 128; workload.range_ratio: none vs 0.0; "
            "workload.temperature: 0.0 vs 1.0; engine_args.gpu_memory_utilization: 0.6 vs 0.3.")
    html = every_sweep.get(f"/compare?base={base}&head={head}").text
    assert "Every base cell differs from every head cell in:" in html
    header, *rows = tables(html)["apart"]
    assert header[1] == ["field", f"base (sweep {base})", f"head (sweep {head})"]
    assert [cells for _, cells in rows][3:] == [
        ["model", "qwen3_8b", "target"], ["workload.dataset", "draftbench", "random"], ["workload.input_len", "none", "128"],
        ["workload.range_ratio", "none", "0.0"], ["workload.temperature", "0.0", "1.0"],
        ["engine_args.gpu_memory_utilization", "0.6", "0.3"]]
    answer = every_sweep.get(f"/api/v1/compare?base_sweep={base}&head_sweep={head}").json()
    assert answer["changes"] == [] and answer["apart"]["sentence"] == said
    fields = {f["field"]: (f["base"], f["head"], f["every_cell"]) for f in answer["apart"]["fields"]}
    assert fields["model"] == (["qwen3_8b"], ["target"], True) and fields["workload.temperature"] == (["0.0"], ["1.0"], True)
    # Builds that share cells are not apart.
    shared = every_sweep.get(f"/api/v1/compare?base_sweep={ids['h200-matrix'][0]}&head_sweep={ids['h200-matrix-rest'][0]}").json()
    assert shared["changes"] and shared["apart"] is None


def test_fallback_names_each_rows_build_so_one_config_in_two_builds_is_two_rows_that_say_why(tmp_path: Path) -> None:
    """One draft_model cell in two builds (the slow GPU's head and its base): two rows alike but for their build, which
    once only the figures' titles named."""
    url = f"sqlite:///{tmp_path / 'builds.db'}"
    for name in ("h200-proof22-slow25-base", "h200-proof22-slow25-head"):
        imported_folder(url, DATA / "h200-2026-12-04" / name)
    for client in in_process(url):
        header, *rows = tables(client.get("/fallback").text)["costs"]
        assert header[1][:4] == ["build", "GPU", "method", "backend"]
        shown = sorted((cells[0], *cells[1:5], cells[7]) for _, cells in rows)
        stored = sorted((r["build"], r["gpu_kind"], r["method"], r["backend"], r["graph_mode"]) for r in
                        csv.DictReader(io.StringIO(client.get("/fallback?format=csv").text)))
        assert [row[:5] for row in shown] == stored and [row[0] for row in shown] == ["vllm-0.26.0", "vllm-0.26.0-slow-gpu-11.5ms"]
        assert len({row[1:5] for row in shown}) == 1  # the same cell but for its build
        # Each start's rounds summed, not a rounded mean of them: 3 starts, 15 rounds.
        assert all(row[5].endswith("3 starts · 15 rounds") for row in shown)
    imported(url, "batch2/h200-serving")
    for client in in_process(url):
        # A heading names the builds of the cells it shows, not every build of the newest sweeps.
        heading = re.findall(r"<h1>([^<]*)</h1>", client.get("/serving").text)
        assert heading == ["Serving cells of build vllm-0.26.0 (of the newest sweeps&#39; builds)"]
        both = "builds vllm-0.26.0, vllm-0.26.0-slow-gpu-11.5ms (of the newest sweeps&#39; builds)"
        assert re.findall(r"<h1>([^<]*)</h1>", client.get("/matrix").text) == [f"Matrix of {both}"]


def test_history_links_each_point_to_the_sweep_that_ran_it_not_the_one_where_it_waits(h200: TestClient) -> None:
    """The matrix's TRITON_ATTN DFlash FULL_AND_PIECEWISE cell: queued in sweep 1 when its lease ended, run in sweep 2
    (h200-matrix-rest); the point linked sweep 1, where it never ran."""
    query = "/history?gpu_kind=H200&method=dflash&backend=TRITON_ATTN&graph_mode=FULL_AND_PIECEWISE"
    html = h200.get(query).text
    [_, (_, cells)] = tables(html)["points"]
    assert cells[-1] == "sweep 2"
    run = html[html.index('id="points"'):].split("</table>")[0]
    assert 'href="/sweeps/2"' in run and 'href="/sweeps/1"' not in run
    [row] = csv.DictReader(io.StringIO(h200.get(query + "&format=csv").text))
    assert (row["sweeps"], row["measured_sweeps"], row["sweep"]) == ("1 2", "2", "2")


def test_no_page_links_the_log_of_a_job_that_never_ran(every_sweep: TestClient) -> None:
    """Queued jobs have no log (404): batch 2's A/A sweep left 11 of its 12 unrun, and the offline speedup line of
    FLASHINFER DFlash linked three of those where its four starts that ran went unlinked."""
    pages = ["/", "/matrix", "/fallback", "/serving", "/serving?mode=offline", "/alarms", "/calibration", "/history",
             "/compare", *(f"/sweeps/{i}" for ids in _sweep_ids(every_sweep).values() for i in ids)]
    links = {link for page in pages for link in re.findall(r'href="(/api/v1/jobs/\d+/log)"', every_sweep.get(page).text)}
    assert len(links) > 20
    assert [link for link in links if every_sweep.get(link).status_code != 200] == []
    html = every_sweep.get("/serving?mode=offline").text
    line = next(part for part in html.split('<section class="speedup-line"')[1:] if "dflash" in part and "FLASHINFER" in part
                and "PIECEWISE" in part.split(">")[0])
    row = next(cells for _, cells in tables(line.split("</section>")[0])[""][1:] if cells[0].startswith("3"))
    ran = sorted(r["job_id"] for r in every_sweep.get("/api/v1/results").json()
                 if r["method"] == "dflash" and r["backend"] == "FLASHINFER" and r["graph_mode"] == "FULL_AND_PIECEWISE")
    assert len(ran) == 4 and all(f"log {j}" in row[-1] for j in ran), (ran, row[-1])


def test_the_matrix_orders_clients_as_numbers(tmp_path: Path) -> None:
    """c=1, c=16, c=4, c=64 read as text; as numbers, c=1, c=4, c=16, c=64, in the table, its panels and its CSV."""
    url = f"sqlite:///{tmp_path / 'bestk.db'}"
    imported_folder(url, DATA / "h200-2026-12-04c" / "h200-bestk-8b")
    for client in in_process(url):
        html = client.get("/matrix").text
        labels = [cells[1] for _, cells in tables(html)["cells"][1:]]
        baselines = [label for label in labels if label.startswith("baseline")]
        assert baselines == ["baseline c=1", "baseline c=4", "baseline c=16", "baseline c=64"]
        titles = [f.split(" · ")[1] for f in re.findall(r'data-title="([^"]+)"', html)]
        assert [t for t in titles if t.startswith("baseline")] == baselines
        rows = list(csv.DictReader(io.StringIO(client.get("/matrix?format=csv").text)))
        assert [r["method"] for r in rows if r["method"].startswith("baseline")] == baselines


def test_the_matrix_says_what_lossless_means_and_that_a_synthetic_cells_share_is_low_by_design(tmp_path: Path) -> None:
    """The best-k sweep's drafts accept at set rates (synthetic): 3 to 14 % of their outputs equal the baseline's, by
    design, which read as a correctness failure without a word of what the column is."""
    url = f"sqlite:///{tmp_path / 'bestk.db'}"
    imported_folder(url, DATA / "h200-2026-12-04c" / "h200-bestk-8b")
    for client in in_process(url):
        html = client.get("/matrix").text
        header = html[html.index('id="lossless-header"'):].split("</th>")[0]
        assert "whose output equals its baseline" in header and "below 1 is a finding" in header
        assert "rejection_sample_method: synthetic" in header and "differs by design" in header
        rows = list(csv.DictReader(io.StringIO(client.get("/matrix?format=csv").text)))
        shares = [r for r in rows if r["lossless"]]
        assert shares and all(r["synthetic_acceptance"] == "True" and float(r["lossless"]) < 0.2 for r in shares)
        assert all(float(r["lossless_low"]) <= float(r["lossless"]) <= float(r["lossless_high"]) for r in shares)
        cells = {(cells[1], cells[2], cells[3]): cells[11] for _, cells in tables(html)["cells"][1:]}
        for r in shares:
            shown = cells[(r["method"], r["backend"], r["graph_mode"])]
            assert shown.startswith(f"{float(r['lossless']):.2f} [") and f"of {r['lossless_requests']} requests" in shown
            assert shown.endswith("synthetic: differs by design")


def test_tokens_per_joule_of_results_stored_before_energy_was_read_says_not_recorded_and_why(h200: TestClient) -> None:
    """The matrix ran before cells read energy: its rows hold no reason (NULL), which read "not reported" with an empty
    tooltip, as if the GPU had failed to report it."""
    html = h200.get("/matrix").text
    said = {(html_lib.unescape(title), text) for title, text in
            re.findall(r'class="muted not-reported" title="([^"]*)">([^<]*)<', html)}
    assert said == {("not recorded: stored before draftbench read the GPUs' energy (a row from before migration "
                     "0023)", "not recorded")}
    assert {r["energy_reason"] for r in h200.get("/api/v1/results").json()} == {None}
    rows = csv.DictReader(io.StringIO(h200.get("/matrix?format=csv").text))
    assert {r["energy_reasons"] for r in rows if r["ran"] != "0"} == {next(iter(said))[0]}


def test_noise_says_an_imported_starts_host_is_not_recorded_not_that_its_gpu_is_the_host(every_sweep: TestClient) -> None:
    html = every_sweep.get("/noise").text
    header, *rows = tables(html)[""]  # the H200's table (tables of class "noise", without an id)
    assert header[1][-1] == "hosts (GPUs)"
    # The column of draft or none was headed "cells", beside "cells pooled": one word for two ideas.
    assert header[1][2:8] == ["draft or none", "mode", "CV between starts", "df", "cells pooled", "starts"]
    assert {cells[2] for _, cells in rows} <= {"with a draft", "baseline"}
    assert rows and all(cells[-1] == "none recorded (imported starts)NVIDIA H200" for _, cells in rows)
