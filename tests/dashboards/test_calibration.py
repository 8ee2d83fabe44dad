"""``/calibration`` over the H200's calibration sweep at temperature 1 (batch 4: two configs of rates, FLASH_ATTN and
FLASHINFER, one engine start x 3 rounds each): the rates shown are the stored ones, and what was pooled is said."""

import csv
import io
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.cells.calibration import Position
from app.models import Result
from dashboards.pages.calibration import digits
from dashboards.render import interval
from tests.dashboards.h200 import copy_of, imported, in_process
from tests.dashboards.shown import figures
from tests.dashboards.test_pages import tables
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body

SWEEP = "batch4/h200-calibration-t1"


@pytest.fixture(scope="module")
def h200(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    url = f"sqlite:///{tmp_path_factory.mktemp('calibration') / 'h200.db'}"
    imported(url, SWEEP, "proof/h200-matrix")
    yield from in_process(url)


def _sections(html: str) -> list[tuple[str, int, list[list[str]]]]:
    """Each cell's heading, the one job it pooled (from its "Pooled:" line) and its table's body rows."""
    found = []
    for index, section in enumerate(html.split('<section class="calibration-cell"')[1:], start=1):
        heading = " ".join(re.sub(r"<[^>]+>", " ", section.split("<h2>")[1].split("</h2>")[0]).split())
        [job] = re.findall(r"engine start \(job (\d+)\)", re.sub(r"<[^>]+>", "", section))
        found.append((heading, int(job), [cells for _, cells in tables(section)[f"positions-{index}"][1:]]))
    return found


def test_each_cell_shows_the_stored_rates_asked_for_and_measured_with_counts_and_no_miss(h200: TestClient) -> None:
    html = h200.get("/calibration").text
    stored = {r["job_id"]: r for r in h200.get("/api/v1/results").json()}
    sections = _sections(html)
    # The four calibration cells; the matrix's cells asked for no rates.
    assert len(sections) == 4 and len({heading for heading, _, _ in sections}) == 4
    for heading, job, rows in sections:
        result = stored[job]
        assert result["backend"] in heading and "asked " + "/".join(f"{r:g}" for r in result["expected_per_position"]) in heading
        for row, rate, measured in zip(rows, result["expected_per_position"], result["per_position"], strict=True):
            shown = len(row[1].split(".")[1])  # 3 decimals, more where 3 would blur the interval's ends with the rate
            assert shown >= 3 and row[1] == f"{rate:.{shown}f}" and row[2] == interval(*measured, shown)
        assert [row[3] for row in rows] == [f"{at} / {result['num_drafts']}" for at in result["accepted_per_position"]]
        assert [row[4] for row in rows] == ["no"] * 3 and result["calibration_miss"] is False
    text = " ".join(html.split())
    assert "1 engine start (job 1), 3 measured rounds in all, 18938 drafts" in re.sub(r"<[^>]+>", "", text)
    assert '(job <a href="/api/v1/jobs/1/log"' in text  # the job pooled, linked to its log
    assert 'id="headline">No miss: every position of the 4 calibration cell(s)' in text
    charts = figures(h200, html)
    assert len(charts) == 4 and "<svg" not in html
    assert all("asked against measured" in chart.img["alt"] and "no position missed" in chart.img["alt"] for chart in charts)
    assert all("asked (synthetic_acceptance_rates)" in chart.texts() for chart in charts)


def test_the_csv_holds_the_stored_rates(h200: TestClient) -> None:
    rows = list(csv.DictReader(io.StringIO(h200.get("/calibration", params={"format": "csv"}).text)))
    stored = {r["job_id"]: r for r in h200.get("/api/v1/results").json()}
    assert len(rows) == 12
    for row in rows:
        result, i = stored[int(row["jobs"])], int(row["position"]) - 1
        assert float(row["expected"]) == result["expected_per_position"][i]
        assert (float(row["measured"]), float(row["measured_low"]), float(row["measured_high"])) == tuple(result["per_position"][i])
        assert (int(row["accepted"]), int(row["drafts"])) == (result["accepted_per_position"][i], result["num_drafts"])
        assert row["miss"] == "False" and result["calibration_miss"] is False


def test_filters_narrow_the_cells(h200: TestClient) -> None:
    assert len(_sections(h200.get("/calibration?backend=FLASHINFER").text)) == 2
    assert 'id="empty"' in h200.get("/calibration?method=dflash").text


def test_cells_that_missed_are_named_on_top_and_flagged(tmp_path) -> None:
    """The proof's temperature-1 cells (superseded by batch 4's) missed every position: the sampler drew from vLLM's
    global generator (docs/h200-report.md)."""
    for client in in_process(copy_of("proof", tmp_path)):
        html = " ".join(client.get("/calibration?sweep_id=2").text.split())
        headline = html[html.index('id="headline"'):].split("</p>")[0]
        assert "4 of 4 calibration cell(s) miss a rate asked for" in headline and headline.count("positions 1, 2, 3") == 4
        for _, _, rows in _sections(html):
            assert [row[4] for row in rows] == ["yes"] * 3
        assert "Starts that missed on their own counts: 1 of 1." in html


def test_a_cell_that_measured_nothing_or_what_no_run_can_make_misses_every_position(client: TestClient, dataset) -> None:
    """A calibration cell that reported no counters, and one whose stored counts no run can make (a position accepting
    more than the drafts, as a database written before the checks may hold): nothing measured, every position a miss."""
    worker = register_worker(client, gpu_kinds=["H200"])
    synthetic = {"method": "draft_model", "model": "/m", "num_speculative_tokens": 3, "rejection_sample_method": "synthetic",
                 "synthetic_acceptance_rates": [0.8, 0.5, 0.3]}
    submit(client, sweep_body(dataset, gpu_kinds=["H200"], backends=["FLASH_ATTN", "FLASHINFER"], repeats=1, speculative=[synthetic]))
    jobs = [claim(client, worker), claim(client, worker)]
    for job, counters in zip(jobs, (None, cell_result()["spec_decode"]), strict=True):
        outcome = {"result": cell_result() | {"spec_decode": counters}, "exit_code": 0}
        assert complete(client, job["job_id"], worker, outcome).status_code == 200
    with client.app.state.sessionmaker.begin() as session:
        session.execute(update(Result).where(Result.job_id == jobs[1]["job_id"]).values(accepted_per_position=[25, 10, 5]))
    response = client.get("/calibration")
    assert response.status_code == 200, response.text[-2000:]
    text = " ".join(response.text.split())
    assert "2 of 2 calibration cell(s) miss" in text and text.count("not measured") == 6
    # The start without counters has no stored verdict of its own: it counts as a miss; the other's held when stored.
    assert text.count("Starts that missed on their own counts: 1 of 1.") == 1
    assert text.count("Starts that missed on their own counts: 0 of 1.") == 1
    assert f"job {jobs[1]['job_id']}: a position accepted more than the 20 drafts; its acceptance is left out" in text


def test_a_position_is_printed_with_the_decimals_that_show_its_miss_or_hold() -> None:
    # At 3 decimals 0.2003 reads 0.200, the asked rate: 4 show the interval [0.2003, 0.2097] excluding it.
    assert digits(Position(3, 0.2, (0.205, 0.2003, 0.2097), 5859, 28587, True)) == 4
    assert digits(Position(1, 0.8, (0.802, 0.7965, 0.8078), 15192, 18938, False)) == 3
    # An end on the asked rate itself (a hold) reads alike at every precision: the most decimals shown.
    assert digits(Position(1, 0.5, (0.55, 0.5, 0.6), 55, 100, False)) == 6
    assert digits(Position(1, 0.5, None, None, 0, True)) == 3


def test_a_cell_titled_by_the_mode_asked_says_vllm_ran_another_with_the_draft_eager(h200: TestClient) -> None:
    """Batch 4's FLASHINFER cells asked FULL_AND_PIECEWISE and ran PIECEWISE with the draft eager: each section says
    so under its heading, with /matrix's marks in its colours; FLASH_ATTN's ran the mode asked, its draft eager."""
    html = h200.get("/calibration").text
    stored = {r["job_id"]: r for r in h200.get("/api/v1/results").json()}
    sections = html.split('<section class="calibration-cell"')[1:]
    assert len(sections) == 4
    for (heading, job, _), section in zip(_sections(html), sections, strict=True):
        result, text = stored[job], " ".join(re.sub(r"<[^>]+>", " ", section).split())
        # vLLM 0.26 turned asynchronous scheduling off for draft_model: marked too, in its own colour.
        assert heading.endswith("draft eager sync scheduling") and '<span class="badge eager"' in section
        assert '<span class="badge sync"' in section
        if result["graph_downgraded"]:
            assert (result["backend"], result["resolved_graph_mode"]) == ("FLASHINFER", "PIECEWISE")
            assert heading.endswith("downgraded draft eager sync scheduling")
            assert ("Not what was asked: 1 of 1 cell asked FULL_AND_PIECEWISE and vLLM ran PIECEWISE (downgraded); the draft "
                    "ran without CUDA graphs in 1 of 1 cell with a draft (draft eager).") in text
            assert '<span class="badge downgraded" title="asked FULL_AND_PIECEWISE; vLLM ran PIECEWISE">' in section
        else:
            assert result["backend"] == "FLASH_ATTN" and "downgraded" not in heading
            assert "Not what was asked: the draft ran without CUDA graphs in 1 of 1 cell with a draft (draft eager)." in text
    assert sum(stored[job]["graph_downgraded"] for _, job, _ in _sections(html)) == 2
    rows = list(csv.DictReader(io.StringIO(h200.get("/calibration", params={"format": "csv"}).text)))
    assert {(r["backend"], r["resolved_graph_mode"], r["downgraded"], r["draft_eager"]) for r in rows} == {
        ("FLASHINFER", "PIECEWISE", "True", "True"), ("FLASH_ATTN", "FULL_AND_PIECEWISE", "False", "True")}
