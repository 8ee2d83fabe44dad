"""Issue 23's serving proof on the H200 (docs/h200-report.md): the 8B shape served with a small random draft at synthetic
acceptance 0.7/0.5/0.35/0.25 (each k its first k), against no speculation at 1, 4, 16 and 64 clients, as
``/api/v1/speedups`` and ``/serving`` read it. Two machines: ``tests/data/h200-2026-12-04c/h200-bestk-8b`` (2026-12-04: the
baseline and k=1 at every load, k=2 at 1 and 4 clients; the device time ended there) and ``tests/data/h200-2026-12-05``
(k=2 at 16 and 64, ``h200-bestk-8b-rest``; k=4 at 1, 4 and 16, ``h200-bestk-8b-k4``, whose 64-client cell the device time
cut). One start a cell."""

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.dashboards.h200 import DATA, imported_folder, in_process, rounded_speedups

BESTK = DATA / "h200-2026-12-04c" / "h200-bestk-8b"
REST = (DATA / "h200-2026-12-05" / "h200-bestk-8b-rest", DATA / "h200-2026-12-05" / "h200-bestk-8b-k4")


@pytest.fixture(scope="module")
def h200(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    url = f"sqlite:///{tmp_path_factory.mktemp('bestk') / 'bestk.db'}"
    for folder in (BESTK, *REST):
        imported_folder(url, folder)
    yield from in_process(url)


def test_one_line_holds_every_k_of_the_synthetic_series_and_no_cell_still_queued(h200: TestClient) -> None:
    # Each k's cell holds the first k rates ([0.7], [0.7, 0.5], all four): one line, not one per k, across both sweeps
    # and machines. The queued cells measured nothing and sit on no line (before, a line of their own with no resolved
    # graph mode, "no baseline ran").
    [line] = h200.get("/api/v1/speedups").json()
    assert (line["ks"], line["loads"], line["resolved_graph_mode"]) == ([1, 2, 4], [1, 4, 16, 64], "FULL_AND_PIECEWISE")
    assert sorted((c["k"], c["load"]) for c in line["cells"]) == [
        (1, 1), (1, 4), (1, 16), (1, 64), (2, 1), (2, 4), (2, 16), (2, 64), (4, 1), (4, 4), (4, 16)]
    # The counters' mean acceptance length is what the synthetic sampler was asked: 1.7, 2.2 and 2.8.
    assert {c["k"]: round(c["acceptance_length"], 1) for c in line["cells"]} == {1: 1.7, 2: 2.2, 4: 2.8}


def test_speculation_pays_at_no_client_count_measured_and_the_best_k_says_so(h200: TestClient) -> None:
    # Baseline 183, 693, 2328, 6086 tok/s; k=1 115, 444, 1715, 4521; k=2 118, 423, 1504, 4435; k=4 91, 274, 877 (one
    # start each, rounds' intervals).
    [line] = h200.get("/api/v1/speedups").json()
    assert rounded_speedups(line) == {(1, 1): (0.63, 0.56, 0.70), (1, 4): (0.64, 0.53, 0.78), (1, 16): (0.74, 0.65, 0.84),
                        (1, 64): (0.74, 0.59, 0.93), (2, 1): (0.64, 0.58, 0.71), (2, 4): (0.61, 0.51, 0.73),
                        (2, 16): (0.65, 0.54, 0.77), (2, 64): (0.73, 0.61, 0.87), (4, 1): (0.50, 0.46, 0.54),
                        (4, 4): (0.39, 0.36, 0.43), (4, 16): (0.38, 0.33, 0.43)}
    assert [e["sentence"] for e in line["break_even"]] == [
        "draft_model k=1 on FLASH_ATTN pays at none of the loads measured (1 to 64 clients)",
        "draft_model k=2 on FLASH_ATTN pays at none of the loads measured (1 to 64 clients)",
        "draft_model k=4 on FLASH_ATTN pays at none of the loads measured (1 to 16 clients)"]
    # k=4 is never the best nor within noise of it: its longer acceptance (2.8) does not pay for two more drafted tokens.
    assert [b["sentence"] for b in line["best"]] == [
        "best k: 2 at 1 client (0.64x [0.58, 0.71]), surely slower than the baseline; 1 within noise",
        "best k: 1 at 4 clients (0.64x [0.53, 0.78]), surely slower than the baseline; 2 within noise",
        "best k: 1 at 16 clients (0.74x [0.65, 0.84]), surely slower than the baseline; 2 within noise",
        "best k: 1 at 64 clients (0.74x [0.59, 0.93]), surely slower than the baseline; 2 within noise"]


def test_the_counters_predict_each_cell_and_two_on_another_machine_run_faster_than_predicted(h200: TestClient) -> None:
    # Where two or more k ran, T(k) = c_verify + k c_draft is fitted to TPOT p50 x tau at each load. k=2 at 16 and 64
    # clients ran on the second machine, beside none of their line's other cells: measured above their prediction
    # (0.65x against 0.54, 0.73x against 0.55), outside their intervals, so the page flags them; every other cell follows.
    [line] = h200.get("/api/v1/speedups").json()
    predicted = {(c["k"], c["load"]): round(c["predicted_speedup"], 2) for c in line["cells"]}
    assert predicted == {(1, 1): 0.70, (1, 4): 0.71, (1, 16): 0.73, (1, 64): 0.62, (2, 1): 0.63, (2, 4): 0.56,
                         (2, 16): 0.54, (2, 64): 0.55, (4, 1): 0.49, (4, 4): 0.41, (4, 16): 0.37}
    assert line["one_k"] == []
    assert sorted((c["k"], c["load"]) for c in line["cells"] if c["off_prediction"]) == [(2, 16), (2, 64)]


def test_every_cell_that_ran_reports_its_joules_on_the_page(h200: TestClient) -> None:
    results = [r for r in h200.get("/api/v1/results").json() if r["sweep_name"].startswith("h200-bestk-8b")]
    assert len(results) == 15 and all(r["tokens_per_joule"] and r["energy_j"] > 0 for r in results)
    # At 64 clients 13.2 (k=1) and 12.6 (k=2) tokens/J against the baseline's 12.6: slower, yet no more energy a token.
    per_joule = {(r["method"], r["sweep_name"]): round(r["tokens_per_joule"], 1) for r in results if r["concurrency"] == 64}
    assert per_joule == {("draft_model", "h200-bestk-8b"): 13.2, ("draft_model", "h200-bestk-8b-rest"): 12.6,
                         (None, "h200-bestk-8b"): 12.6}
    html = h200.get("/serving").text
    assert "pays at none of the loads measured (1 to 64 clients)" in html
    assert html.count("not reported") == 0


def test_the_draft_cells_ran_without_async_scheduling_and_the_page_says_their_baselines_had_it(h200: TestClient) -> None:
    # vLLM 0.26 logged "Async scheduling not supported with draft_model-based speculative decoding and will be disabled."
    # in every draft cell and nothing of it in the baselines': each speedup holds the scheduler's cost too.
    [line] = h200.get("/api/v1/speedups").json()
    assert all(c["scheduler_differs"] for c in line["cells"])
    sentence = ("vLLM turned asynchronous scheduling off for draft_model k=1, 2, 4 and kept it for their baselines (each "
                "start's log says so): these speedups hold the scheduler's cost as well as the drafting's.")
    assert line["scheduler"] == sentence
    html = h200.get("/serving").text
    assert sentence.replace("'", "&#39;") in html and html.count(">sync scheduling</span>") == 22  # the line's table and the serving table
    matrix = h200.get("/matrix").text
    assert matrix.count(">sync scheduling</span>") == 11
    # vLLM 0.26 ran each draft without CUDA graphs beside the target's: said over the line and over the serving table,
    # counted among the cells with a draft (the baselines have none; "11 of 15" before).
    assert html.count("the draft ran without CUDA graphs in 11 of 11 cells with a draft (draft eager)") == 2
    results = [r for r in h200.get("/api/v1/results").json() if r["sweep_name"].startswith("h200-bestk-8b")]
    assert sorted((r["method"] or "", r["async_scheduling_off"]) for r in results) == [("", False)] * 4 + [("draft_model", True)] * 11
