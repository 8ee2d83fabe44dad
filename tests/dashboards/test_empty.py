"""The pages of a database with nothing stored, and of sweeps whose cells have not run: each says so in a sentence that
holds ("No sweep is stored yet"), never one made of a scope that is not there ("Matrix of no build yet", "in every build",
"every cell that ran succeeded"), and each CSV is its header row alone."""

import csv
import io
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.dashboards.h200 import in_process
from tests.factories import register_worker, submit, sweep_body

PAGES = ["/", "/fallback", "/matrix", "/serving", "/serving?mode=offline", "/alarms", "/alarms?min_effect=0.5", "/compare",
         "/history", "/calibration", "/crashes", "/noise"]
# The CSV of each page that has one, and the columns its header row starts with.
CSVS = {
    "/matrix": "build,gpu_kind,method,variant,", "/fallback": "build,gpu_kind,method,variant,",
    "/serving": "build,gpu_kind,backend,graph_mode,", "/serving?table=speedup": "line_number,line,build,",
    "/serving?mode=offline&table=speedup": "line_number,line,build,", "/alarms": "alarm_kind,build,gpu_kind,",
    "/alarms?min_effect=0.5": "alarm_kind,build,gpu_kind,", "/compare": "verdict,build,gpu_kind,",
    "/history": "build,gpu_kind,method,", "/calibration": "cell,build,gpu_kind,",
}
# What no page may say of nothing.
GARBLED = ["no build yet", "in every build", "every cell that ran", "within the interval"]


@pytest.fixture(scope="module")
def empty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    yield from in_process(f"sqlite:///{tmp_path_factory.mktemp('empty') / 'empty.db'}")


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html.split("</nav>")[-1]).split())


@pytest.mark.parametrize("page", PAGES)
def test_an_empty_database_is_said_to_be_empty_in_words_that_hold(empty: TestClient, page: str) -> None:
    response = empty.get(page)
    assert response.status_code == 200
    text = _text(response.text)
    assert not [said for said in GARBLED if said in text], text


@pytest.mark.parametrize(("page", "said"), [
    ("/matrix", "Matrix Colour by:"), ("/matrix", "No sweep is stored yet: submit one"),
    ("/fallback", "No sweep is stored yet: the cost of a fallback needs speculative cells that ran."),
    ("/calibration", "No sweep is stored yet, so no calibration cell has run."),
    ("/serving", "Serving cells Against clients at once."),
    ("/alarms", "No graphed cell with drafts in any stored build"), ("/alarms", "No alarm: nothing to judge in any stored build."),
    ("/", "No graphed cell with drafts in any stored build"),
    ("/crashes", "No crash: no sweep is stored yet, so nothing has run."),
    # It read "No run of this cell yet: pick a GPU kind, method, backend and graph mode that some sweep ran": of no cell.
    ("/history", "No sweep is stored yet: a history needs a speculative cell that ran."),
])
def test_each_empty_page_says_what_there_is(empty: TestClient, page: str, said: str) -> None:
    assert said in _text(empty.get(page).text)


def test_the_offline_view_says_what_an_offline_line_needs_not_to_submit_a_serving_sweep(empty: TestClient) -> None:
    text = _text(empty.get("/serving?mode=offline").text)
    assert "No sweep is stored yet: the speedup against batch size needs offline cells" in text
    assert "with baseline: true , at several batch sizes" in text and "engine_args: {max_num_seqs: [1, 8, 32]}" in text
    assert "submit a sweep with mode: serve" not in text and "widen the filters" not in text


@pytest.mark.parametrize(("page", "header"), CSVS.items())
def test_an_empty_pages_csv_is_its_header_row(empty: TestClient, page: str, header: str) -> None:
    response = empty.get(page + ("&" if "?" in page else "?") + "format=csv")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    [row] = response.text.strip().splitlines()
    assert row.startswith(header) and len(next(csv.reader(io.StringIO(row)))) > 10


def test_a_sweep_whose_cells_have_not_run_has_no_crash_for_want_of_a_run(client: TestClient, dataset) -> None:
    register_worker(client)
    sweep = submit(client, sweep_body(dataset, name="waiting")).json()
    text = _text(client.get(f"/crashes?sweep_id={sweep['id']}").text)
    assert "No crash: none of the cells these filters select has run yet" in text and "every cell that ran" not in text
    assert "No crash: no cell matches these filters, so nothing has run." in _text(client.get("/crashes?build=nothing").text)

