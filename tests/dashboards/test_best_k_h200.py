"""Issue 23's serving proof on one H200 (2026-12-04, ``tests/data/h200-2026-12-04c/h200-bestk-8b``; docs/h200-report.md):
the 8B shape served with a small random draft at synthetic acceptance 0.7/0.5/0.35/0.25, k = 1 and 2, against no
speculation at 1, 4, 16 and 64 clients, as ``/api/v1/speedups`` and ``/serving`` read it. 10 of the sweep's 16 cells ran
(the device time ended): k=2 at 16 and 64 clients and every k=4 cell were still queued."""

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.dashboards.h200 import DATA, imported_folder, in_process

BESTK = DATA / "h200-2026-12-04c" / "h200-bestk-8b"


@pytest.fixture(scope="module")
def h200(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    url = f"sqlite:///{tmp_path_factory.mktemp('bestk') / 'bestk.db'}"
    imported_folder(url, BESTK)
    yield from in_process(url)


def test_one_line_holds_every_k_of_the_synthetic_series_and_no_cell_still_queued(h200: TestClient) -> None:
    # Each k's cell holds the first k rates ([0.7], [0.7, 0.5]): one line, not one per k. The 6 queued cells measured
    # nothing and sit on no line (before, a line of their own with no resolved graph mode, "no baseline ran").
    [line] = h200.get("/api/v1/speedups").json()
    assert (line["ks"], line["loads"], line["resolved_graph_mode"]) == ([1, 2], [1, 4, 16, 64], "FULL_AND_PIECEWISE")
    assert sorted((c["k"], c["load"]) for c in line["cells"]) == [(1, 1), (1, 4), (1, 16), (1, 64), (2, 1), (2, 4)]
    # The counters' mean acceptance length is what the synthetic sampler was asked: 1.7 and 2.2.
    assert {c["k"]: round(c["acceptance_length"], 1) for c in line["cells"]} == {1: 1.7, 2: 2.2}


def test_speculation_pays_at_no_client_count_measured_and_the_best_k_says_so(h200: TestClient) -> None:
    # Baseline 183, 693, 2328, 6086 tok/s; k=1 115, 444, 1715, 4521; k=2 118, 423 (one start each, rounds' intervals).
    [line] = h200.get("/api/v1/speedups").json()
    speedups = {(c["k"], c["load"]): (round(c["speedup"], 2), round(c["speedup_low"], 2), round(c["speedup_high"], 2))
                for c in line["cells"]}
    assert speedups == {(1, 1): (0.63, 0.56, 0.70), (1, 4): (0.64, 0.53, 0.78), (1, 16): (0.74, 0.65, 0.84),
                        (1, 64): (0.74, 0.59, 0.93), (2, 1): (0.64, 0.58, 0.71), (2, 4): (0.61, 0.51, 0.73)}
    assert [e["sentence"] for e in line["break_even"]] == [
        "draft_model k=1 on FLASH_ATTN pays at none of the loads measured (1 to 64 clients)",
        "draft_model k=2 on FLASH_ATTN pays at none of the loads measured (1 to 4 clients)"]
    assert [b["sentence"] for b in line["best"]] == [
        "best k: 2 at 1 client (0.64x [0.58, 0.71]), surely slower than the baseline; 1 within noise",
        "best k: 1 at 4 clients (0.64x [0.53, 0.78]), surely slower than the baseline; 2 within noise",
        "best k: 1 at 16 clients (0.74x [0.65, 0.84]), surely slower than the baseline; no other k within noise",
        "best k: 1 at 64 clients (0.74x [0.59, 0.93]), surely slower than the baseline; no other k within noise"]


def test_the_counters_predict_where_two_k_ran_and_the_measured_speed_follows(h200: TestClient) -> None:
    # At 1 and 4 clients both k ran: T(k) = c_verify + k c_draft fitted to TPOT p50 x tau; no cell is off its prediction
    # (the draft's cost, not a fallback, is what makes speculation slower here).
    [line] = h200.get("/api/v1/speedups").json()
    predicted = {(c["k"], c["load"]): c["predicted_speedup"] and round(c["predicted_speedup"], 2) for c in line["cells"]}
    assert predicted == {(1, 1): 0.64, (1, 4): 0.66, (2, 1): 0.69, (2, 4): 0.60, (1, 16): None, (1, 64): None}
    assert line["one_k"] == [16, 64] and not any(c["off_prediction"] for c in line["cells"])


def test_every_cell_that_ran_reports_its_joules_on_the_page(h200: TestClient) -> None:
    results = [r for r in h200.get("/api/v1/results").json() if r["sweep_name"] == "h200-bestk-8b"]
    assert len(results) == 10 and all(r["tokens_per_joule"] and r["energy_j"] > 0 for r in results)
    # At 64 clients (k=1 alone ran there) 13.2 tokens/J against the baseline's 12.6: slower, yet less energy a token.
    per_joule = {r["method"]: round(r["tokens_per_joule"], 1) for r in results if r["concurrency"] == 64}
    assert per_joule == {"draft_model": 13.2, None: 12.6}
    html = h200.get("/serving").text
    assert "pays at none of the loads measured (1 to 64 clients)" in html
    assert html.count("not reported") == 0


def test_the_draft_cells_ran_without_async_scheduling_and_the_page_says_their_baselines_had_it(h200: TestClient) -> None:
    # vLLM 0.26 logged "Async scheduling not supported with draft_model-based speculative decoding and will be disabled."
    # in every draft cell and nothing of it in the baselines': each speedup holds the scheduler's cost too.
    [line] = h200.get("/api/v1/speedups").json()
    assert all(c["scheduler_differs"] for c in line["cells"])
    sentence = ("vLLM turned asynchronous scheduling off for draft_model k=1, 2 and kept it for their baselines (each start's "
                "log says so): these speedups hold the scheduler's cost as well as the drafting's.")
    assert line["scheduler"] == sentence
    html = h200.get("/serving").text
    assert sentence.replace("'", "&#39;") in html and html.count(">sync scheduling</span>") == 12  # the line's table and the serving table
    matrix = h200.get("/matrix").text
    assert matrix.count(">sync scheduling</span>") == 6
    results = [r for r in h200.get("/api/v1/results").json() if r["sweep_name"] == "h200-bestk-8b"]
    assert sorted((r["method"] or "", r["async_scheduling_off"]) for r in results) == [("", False)] * 4 + [("draft_model", True)] * 6
