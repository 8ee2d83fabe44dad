"""The checks every route and page runs on its parameters before any query: names it declares, values a database
can compare."""

import pytest

from app.api.deps import MAX_UNKNOWN_NAMED
from tests.conftest import AUTH

NUL = "\x00"

FILTERS = [
    ("/api/v1/results", "build"), ("/api/v1/results.csv", "build"), ("/api/v1/alarms", "build"),
    ("/api/v1/alarms/counts", "build"), ("/api/v1/alerts", "build"), ("/api/v1/speedups", "build"),
    ("/api/v1/parallel", "build"),
]
PAGES = ["/matrix", "/history", "/fallback", "/serving", "/alarms", "/calibration"]


@pytest.mark.parametrize(("path", "name"), FILTERS, ids=[path for path, _ in FILTERS])
def test_a_nul_in_a_text_filter_is_the_same_named_422_on_both_databases(client, path, name) -> None:
    # Before: SQLite compared the text and answered 200 with nothing; PostgreSQL refused the statement (422).
    response = client.get(path, params={name: f"vllm{NUL}0.32"})
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == [
        {"loc": ["query", name], "msg": "holds a NUL character, which the database cannot compare", "type": "value_error"}]


def test_a_nul_in_a_path_parameter_or_a_page_filter_is_422_too(client) -> None:
    crash = client.get(f"/api/v1/crashes/{'f' * 63}%00")
    assert crash.status_code == 422 and crash.json()["detail"][0]["loc"] == ["path", "signature"], crash.text
    for page in PAGES:
        assert client.get(page, params={"build": NUL}).status_code == 422, page
    assert client.get("/compare", params={"base_build": NUL}).status_code == 422


def test_many_unknown_query_parameters_get_one_short_error(client) -> None:
    # Before: one error per name, each repeating the allowed list: a 24 KB URL made a 686 KB answer.
    names = {f"p{i}": "1" for i in range(3000)}
    response = client.get("/api/v1/results", params=names)
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["query", "p0"]
    assert error["msg"].startswith("3000 unknown query parameters; allowed: backend, build, ")
    assert error["msg"].endswith(f"; unknown: {', '.join(list(names)[:MAX_UNKNOWN_NAMED])} and 2990 more")
    assert len(response.content) < 2000
    page = client.get("/matrix", params=names)
    assert page.status_code == 422 and len(page.content) < 20_000


def test_one_unknown_query_parameter_keeps_its_answer(client) -> None:
    [error] = client.get("/api/v1/jobs", params={"sweep": "1"}).json()["detail"]
    assert error["loc"] == ["query", "sweep"]
    assert error["msg"] == "unknown query parameter; allowed: limit, offset, state, sweep_id"


@pytest.mark.parametrize("path", ["/api/v1/jobs?state=queued&state=running", "/api/v1/results?sweep_id=1&sweep_id=2",
                                  "/api/v1/alerts?build=a&build=b", "/matrix?gpu_kind=cpu&gpu_kind=H100"])
def test_a_query_parameter_given_twice_is_422_naming_it(client, path) -> None:
    # Before: the last value was taken silently (?state=queued&state=running listed only running jobs), so a
    # link or a script that meant both got half the rows, with a 200.
    response = client.get(path)
    assert response.status_code == 422, response.text
    name = path.split("?")[1].split("=")[0]
    if path.startswith("/api/"):
        [error] = response.json()["detail"]
        assert error["loc"] == ["query", name] and "given 2 times" in error["msg"], error


@pytest.mark.parametrize(
    ("path", "body"),
    [("/api/v1/tokens", b'{"name": "a", "name": "b", "scopes": ["submit"]}'),
     ("/api/v1/workers", b'{"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "a", "label": "b"}]}')],
    ids=["token", "worker-build"],
)
def test_a_key_given_twice_in_any_json_body_is_422_naming_it(client, path, body) -> None:
    # Before: only a sweep's body refused it; elsewhere the last value won silently (a token named b, a worker's
    # report whose exit_code was the second one written).
    response = client.post(path, content=body, headers=AUTH | {"content-type": "application/json"})
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body"] and "given twice" in error["msg"], error
    assert client.get("/api/v1/workers").json() == [] and client.get("/api/v1/tokens", headers=AUTH).json() == []
