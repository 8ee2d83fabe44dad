"""Every answer says nosniff; pages get a policy that lets them load only their own images and styles; the API's
documents get one that runs only the package's scripts and their own inline one."""

import re

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.api.security_headers import PAGE_POLICY
from app.config import Settings
from tests.conftest import AUTH, TOKEN
from tests.dashboards.test_pages import new_sweep
from tests.factories import sweep_body

PAGES = ["/", "/fallback", "/matrix", "/alarms", "/compare", "/history", "/calibration", "/crashes", "/noise", "/sweeps/1",
         "/matrix?metric=colour", "/sweeps/999", "/crashes/unknown"]
ANSWERS = ["/api/v1/sweeps", "/api/v1/results.csv", "/api/v1/results?graph_mode=FULL_GRAPH", "/api/v1/sweeps/999",
           "/matrix?format=csv", "/openapi.json", "/metrics", "/docs-static/swagger-ui-bundle.js", "/no-such-path"]


def test_every_answer_says_nosniff_and_every_page_carries_the_page_policy(client: TestClient, dataset) -> None:
    new_sweep(client, sweep_body(dataset))
    for path in PAGES:
        response = client.get(path)
        assert response.headers["content-type"].startswith("text/html"), path
        assert response.headers["x-content-type-options"] == "nosniff", path
        assert response.headers["content-security-policy"] == PAGE_POLICY, path
    for path in ANSWERS:
        response = client.get(path)
        assert response.headers["x-content-type-options"] == "nosniff", path
        assert "content-security-policy" not in response.headers, path
    posted = client.post("/api/v1/sweeps", content=b"x" * (2 << 20), headers=AUTH | {"content-type": "application/json"})
    assert posted.status_code == 413 and posted.headers["x-content-type-options"] == "nosniff"


def test_the_page_policy_loads_nothing_from_elsewhere_and_runs_no_script() -> None:
    rules = dict(rule.strip().split(" ", 1) for rule in PAGE_POLICY.split(";"))
    assert rules["default-src"] == "'none'" and "script-src" not in rules and rules["frame-ancestors"] == "'none'"
    assert rules["img-src"] == "'self' data:"  # matplotlib embeds a heatmap's raster as a data: PNG


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_the_api_documents_run_only_their_own_scripts(client: TestClient, path: str) -> None:
    response = client.get(path)
    policy = response.headers["content-security-policy"]
    scripts = re.search(r"script-src ([^;]*)", policy).group(1).split()
    inline = re.findall(r"<script>(.*?)</script>", response.text, re.S)
    assert scripts[0] == "'self'" and len(scripts) == 1 + len(inline) and "'unsafe-inline'" not in scripts
    assert all(s.startswith("'sha256-") for s in scripts[1:]) and response.headers["x-content-type-options"] == "nosniff"


def test_an_unhandled_error_says_nosniff_too(sqlite_url: str) -> None:
    app = create_app(Settings(database_url=sqlite_url, token=TOKEN))

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("boom")

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    app.state.engine.dispose()
    assert response.status_code == 500 and response.headers["x-content-type-options"] == "nosniff"
