"""A page's bad input is answered as a page (422, in HTML, naming the parameter, what was given and what is allowed);
the API keeps its JSON answers."""

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.config import Settings
from app.enums import AttentionBackend, GraphMode, allowed
from app.lru import LRU
from dashboards.cache import SHOWN_PAGES
from dashboards.figures.heatmap import METRICS
from tests.conftest import TOKEN
from tests.dashboards.h200 import copy_of
from tests.dashboards.test_pages import tables


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One app for the module: what is answered depends on the route, not on what is stored."""
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path_factory.mktemp('errors') / 'e.db'}", token=TOKEN))
    with TestClient(app) as test_client:
        yield test_client
    app.state.engine.dispose()


BAD = [
    ("/matrix?graph_mode=FULL_GRAPH", "graph_mode", "FULL_GRAPH", allowed(GraphMode)),
    ("/fallback?backend=FA3", "backend", "FA3", allowed(AttentionBackend)),
    ("/calibration?graph_mode=FULL_GRAPH", "graph_mode", "FULL_GRAPH", allowed(GraphMode)),
    ("/calibration?format=xlsx", "format", "xlsx", ["html", "csv", "svg"]),
    ("/matrix?metric=colour", "metric", "colour", list(METRICS)),
    ("/history?format=pdf", "format", "pdf", ["html", "csv", "svg"]),
    ("/alarms?min_effect=2", "min_effect", "2", ["less than or equal to 1"]),
    ("/history?graphmode=NONE", "graphmode", "", ["allowed: backend, build, figure, format, gpu_kind, graph_mode, method, sweep_id"]),
    ("/compare?base=x", "base", "x", ["a valid integer"]),
    ("/matrix?sweep_id=0", "sweep_id", "0", ["greater than or equal to 1"]),
    ("/serving?graph_mode=FULL_GRAPH", "graph_mode", "FULL_GRAPH", allowed(GraphMode)),
    ("/serving?format=xlsx", "format", "xlsx", ["html", "csv", "svg"]),
    ("/serving?concurrency=16", "concurrency", "",
     ["allowed: backend, build, figure, format, gpu_kind, graph_mode, method, mode, sweep_id, table"]),
    ("/serving?mode=online", "mode", "online", ["'offline' or 'serve'"]),
    ("/serving?format=csv&table=serving_figures", "table", "serving_figures", ["'serving' or 'speedup'"]),
    ("/sweeps/abc", "sweep_id", "abc", ["a valid integer"]),
    (f"/crashes/{'f' * 65}", "signature", "f" * 65, ["at most 64 characters"]),
]


@pytest.mark.parametrize(("page", "field", "given", "allowed_values"), BAD)
def test_a_bad_parameter_on_a_page_is_a_422_page_naming_it_and_what_is_allowed(
        client: TestClient, page: str, field: str, given: str, allowed_values: list[str]) -> None:
    response = client.get(page)
    assert response.status_code == 422 and response.headers["content-type"].startswith("text/html"), response.text[:300]
    [_, (_, (name, shown, allowed_text))] = tables(response.text)["errors"]
    assert name.split()[0] == field and shown == given
    assert all(value in allowed_text for value in allowed_values), allowed_text
    assert 'id="nav"' in response.text  # the page keeps its navigation


def test_a_given_value_is_shown_escaped(client: TestClient) -> None:
    response = client.get("/matrix", params={"backend": "<script>alert(1)</script>"})
    assert response.status_code == 422
    assert "<script>alert(1)</script>" not in response.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text


def test_an_unknown_sweep_page_is_a_404_page(client: TestClient) -> None:
    response = client.get("/sweeps/9999")
    assert response.status_code == 404 and response.headers["content-type"].startswith("text/html")
    assert 'id="message">sweep 9999 not found<' in response.text


# Every page that reads a sweep by its id, and its CSV: a sweep that does not exist once read as an empty one ("No cell
# matches these filters in sweep 9999", "The two sides share no cell (1 and 0 cells)").
MISSING_SWEEP = [f"{page}{sep}{query}" for page in ("/matrix", "/fallback", "/serving", "/serving?mode=offline", "/alarms",
                                                   "/calibration", "/history", "/crashes")
                 for sep in ("&" if "?" in page else "?",) for query in ("sweep_id=9999", "sweep_id=9999&format=csv")
                 if not (page == "/crashes" and "csv" in query)]
MISSING_SWEEP += ["/compare?base=9999&head=9999", "/compare?head=9999", "/compare?base=9999&format=csv",
                  "/alarms?sweep_id=9999&min_effect=0.5"]


@pytest.mark.parametrize("page", MISSING_SWEEP)
def test_a_page_of_a_sweep_that_does_not_exist_is_a_404_naming_it(client: TestClient, page: str) -> None:
    response = client.get(page)
    assert response.status_code == 404 and 'id="message">sweep 9999 not found<' in response.text, response.text[:300]


@pytest.mark.parametrize("path", ["/api/v1/results?graph_mode=FULL_GRAPH", "/api/v1/results?graphmode=NONE",
                                  "/api/v1/sweeps/abc", "/api/v1/sweeps/9999"])
def test_the_api_keeps_its_json_answers(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code in (404, 422) and response.headers["content-type"] == "application/json"
    assert "detail" in response.json()


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The capture-bug proof's database: pages with figures to ask for."""
    app = create_app(Settings(database_url=copy_of("capture-bug", tmp_path_factory.mktemp("drawn")), token=TOKEN))
    with TestClient(app) as test_client:
        yield test_client
    app.state.engine.dispose()


def _svg(page: str, figure: int | None = None) -> str:
    """``page`` (its own query kept: httpx's ``params`` would replace it) asking for a figure."""
    query = "format=svg" + (f"&figure={figure}" if figure is not None else "")
    return f"{page}{'&' if '?' in page else '?'}{query}"


# Pages that draw figures there, and how many.
DRAWN = [("/matrix?sweep_id=4", 1), ("/fallback?sweep_id=4", 1), ("/history?sweep_id=4", 1), ("/sweeps/4", 1)]


@pytest.mark.parametrize(("page", "count"), DRAWN)
def test_format_svg_without_a_figure_is_a_422_naming_figure_and_the_figures_drawn(
        drawn: TestClient, page: str, count: int) -> None:
    response = drawn.get(_svg(page))
    assert response.status_code == 422, response.text[:300]
    [_, (_, (name, shown_value, allowed_text))] = tables(response.text)["errors"]
    assert name.split()[0] == "figure" and shown_value == ""
    assert "format=svg needs figure" in allowed_text and f"allowed values: {', '.join(map(str, range(1, count + 1)))}" in allowed_text


@pytest.mark.parametrize(("given", "said"), [("x", "a valid integer"), ("0", "greater than or equal to 1"),
                                             ("1.5", "a valid integer"), ("", "format=svg needs figure")])
def test_a_bad_figure_number_is_a_422_naming_figure(drawn: TestClient, given: str, said: str) -> None:
    response = drawn.get("/matrix", params={"sweep_id": 4, "format": "svg", "figure": given})
    assert response.status_code == 422 and response.headers["content-type"].startswith("text/html")
    [_, (_, (name, _, allowed_text))] = tables(response.text)["errors"]
    assert name.split()[0] == "figure" and said in allowed_text, allowed_text


@pytest.mark.parametrize(("page", "count"), DRAWN)
def test_a_figure_past_the_pages_figures_is_a_404_saying_which_it_draws(drawn: TestClient, page: str, count: int) -> None:
    response = drawn.get(_svg(page, count + 1))
    assert response.status_code == 404 and response.headers["content-type"].startswith("text/html")
    assert f'id="message">figure {count + 1} (this page draws figure {count}) not found<' in response.text
    svg = drawn.get(_svg(page, count))
    assert svg.headers["content-type"].startswith("image/svg+xml") and "default-src 'none'" in svg.headers["content-security-policy"]


def test_a_page_that_draws_nothing_answers_404_for_any_figure(client: TestClient) -> None:
    response = client.get("/matrix", params={"format": "svg", "figure": 1})
    assert response.status_code == 404 and "figure 1 (this page draws no figure) not found" in response.text


@pytest.mark.parametrize(("page", "count"), DRAWN)
def test_an_image_asked_for_after_its_page_is_the_figure_the_page_read_and_the_same_drawn_afresh(
        drawn: TestClient, page: str, count: int) -> None:
    drawn.app.state.shown_figures = LRU(SHOWN_PAGES)
    fresh = drawn.get(_svg(page, count)).text  # nothing kept: the page's values read for it
    assert drawn.get(page).status_code == 200
    [(_, drawings)] = drawn.app.state.shown_figures._items.values()
    assert len(drawings) == count and drawn.get(_svg(page, count)).text == fresh == drawings[count - 1].svg()
