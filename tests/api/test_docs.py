"""``/docs`` and ``/redoc`` work with no internet and under their Content-Security-Policy: their scripts come from
the installed package, and a real browser shows every operation of the API."""

from collections.abc import Iterator

import pytest

from app.config import Settings
from tests.conftest import TOKEN
from tests.live import serve


@pytest.fixture
def live_server(sqlite_url: str) -> Iterator[str]:
    with serve(Settings(database_url=sqlite_url, token=TOKEN)) as url:
        yield url


def _offline_page(chromium, base: str, refused: list[str]):
    """A page that may load only from the service: anything else is refused, and recorded when it is
    code or style (ReDoc's footer also asks a CDN for its logo, an image the page does without). What its
    Content-Security-Policy refuses is recorded too, but for images from elsewhere (that logo)."""
    page = chromium.new_page(viewport={"width": 1280, "height": 900})

    def policy(message) -> None:
        text = message.text
        if "Content Security Policy" in text and not ("image" in text and f"'{base}" not in text):
            refused.append(text)

    page.on("console", policy)

    def only_local(route) -> None:
        if route.request.url.startswith(base):
            route.continue_()
            return
        if route.request.resource_type != "image":
            refused.append(route.request.url)
        route.abort()

    page.route("**/*", only_local)
    return page


def test_swagger_ui_lists_every_operation_without_internet(live_server: str, chromium, tmp_path) -> None:
    import httpx

    spec = httpx.get(f"{live_server}/openapi.json").json()
    operations = sum(len(methods) for methods in spec["paths"].values())
    refused: list[str] = []
    page = _offline_page(chromium, live_server, refused)
    assert "script-src 'self' 'sha256-" in page.goto(f"{live_server}/docs").headers["content-security-policy"]
    page.wait_for_selector(".opblock", timeout=30_000)
    assert page.locator(".opblock").count() == operations > 15
    assert page.get_by_text("/api/v1/sweeps/{sweep_id}/cancel").count() >= 1
    page.screenshot(path=str(tmp_path / "docs.png"))
    assert refused == []


def test_redoc_renders_the_operations_without_internet(live_server: str, chromium) -> None:
    refused: list[str] = []
    page = _offline_page(chromium, live_server, refused)
    assert "script-src 'self';" in page.goto(f"{live_server}/redoc").headers["content-security-policy"]
    page.wait_for_selector("[data-section-id^='operation/']", state="attached", timeout=30_000)
    assert page.locator("[data-section-id^='operation/']").count() > 15
    # Its search runs in a worker it makes from a blob: the policy allows that and nothing else.
    page.fill("input[placeholder='Search...']", "sweep")
    page.wait_for_selector("[role=search] li", timeout=30_000)
    assert refused == []
