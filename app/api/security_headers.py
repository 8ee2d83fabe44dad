"""Headers that tell browsers what a response may do: nosniff on every response, a Content-Security-Policy on pages.

The pages are server-rendered HTML without scripts; their figures are SVG images of the pages' own URLs
(matplotlib writes style attributes and embeds a heatmap as a ``data:`` PNG). So a page, or a figure opened on
its own, may load nothing but its own images and styles, and text that reached a page (a sweep name, a crash
message) can run nothing even if it escaped the templates' escaping. The API's documents (``/docs``,
``/redoc``) run the ``fastapi-offline`` package's scripts: each sets its own policy (``script_policy``), which this
middleware leaves as it is.
"""

import base64
import hashlib
import re

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAGE_POLICY = ("default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; base-uri 'none'; "
               "form-action 'self'; frame-ancestors 'none'")
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


NOSNIFF = {"X-Content-Type-Options": "nosniff"}


def install(app: FastAPI) -> None:
    """Call after adding the other middleware: this one goes outside them, so their own answers (413, 503) get it."""
    app.add_middleware(SecurityHeadersMiddleware)
    # Starlette answers an unhandled error outside every middleware: that answer carries the header itself.
    app.add_exception_handler(Exception, _server_error)


def script_policy(html: str) -> str:
    """The policy of a page that runs scripts: its own files, its inline scripts by their hashes (and no other
    inline script), the schema it fetches, and the workers and styles ReDoc and Swagger UI build at run time."""
    scripts = ["'self'", *(f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
                           for s in _INLINE_SCRIPT.findall(html))]
    return (f"default-src 'none'; script-src {' '.join(scripts)}; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "connect-src 'self'; worker-src blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class SecurityHeadersMiddleware:
    """``X-Content-Type-Options: nosniff`` on every response; ``PAGE_POLICY`` on HTML and SVG that set no policy."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.update(NOSNIFF)
                if (headers.get("content-type", "").startswith(("text/html", "image/svg+xml"))
                        and "content-security-policy" not in headers):
                    headers["Content-Security-Policy"] = PAGE_POLICY
            await send(message)

        await self.app(scope, receive, with_headers)


async def _server_error(_: Request, __: Exception) -> PlainTextResponse:
    return PlainTextResponse("Internal Server Error", status_code=500, headers=NOSNIFF)
