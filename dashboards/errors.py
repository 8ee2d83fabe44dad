"""A page's bad input answered as a page: the same status and errors the API answers as JSON, shown in HTML.

A person follows a link or submits a form; a wrong filter (``/matrix?graph_mode=FULL_GRAPH``) shows which
parameter was wrong, what was given and what is allowed, beside the navigation. The API keeps its JSON.
"""

import inspect
import json
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.routing import Match

from dashboards import render


def install(app: FastAPI) -> None:
    """Wrap each of the app's error answers (install after ``app.api.handlers``): on a page, a 4xx becomes HTML."""
    for kind, answer in list(app.exception_handlers.items()):
        app.add_exception_handler(kind, _as_page(answer))


Handler = Callable[[Request, Exception], Response | Awaitable[Response]]


def _as_page(answer: Handler) -> Callable[[Request, Exception], Awaitable[Response]]:
    async def answer_page(request: Request, exc: Exception) -> Response:
        response = answer(request, exc)
        if inspect.isawaitable(response):
            response = await response
        if not (_is_page(request) and 400 <= response.status_code < 500 and response.media_type == "application/json"):
            return response
        detail = json.loads(response.body)["detail"]
        return render.page(request, "error.html", None, status_code=response.status_code,
                           errors=detail if isinstance(detail, list) else None,
                           message=detail if isinstance(detail, str) else None, listing=_listing(request))

    return answer_page


def _listing(request: Request) -> str | None:
    """The page that lists what a missing item's page would have shown (``/crashes`` for ``/crashes/nope``), where the
    service has one; None for the overview."""
    parts = request.url.path.strip("/").split("/")
    listing = f"/{parts[0]}"
    scope = {"type": "http", "method": "GET", "path": listing, "root_path": ""}
    if len(parts) < 2 or not any(r.matches(scope)[0] is Match.FULL for r in request.app.routes):
        return None
    return listing


def _is_page(request: Request) -> bool:
    endpoint = getattr(request.scope.get("route"), "endpoint", None)
    return getattr(endpoint, "__module__", "").startswith("dashboards.pages.")
