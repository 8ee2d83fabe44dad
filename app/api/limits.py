"""Request body size limits, enforced before a handler reads the body."""

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(Exception):
    pass


class BodyLimitMiddleware:
    """Answer 413 to a body over its limit: by Content-Length up front, else while it streams in.

    Logs (``PUT .../log``) and reports (``POST .../complete``) get their own, larger limit: a report holds
    one entry per measured request, about 10.8 MB for a cell of 100,000 prompts (the most a workload has).
    """

    def __init__(self, app: ASGIApp, *, max_body: int, max_log: int) -> None:
        self.app = app
        self.max_body = max_body
        self.max_log = max_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_log if scope["path"].endswith(("/log", "/complete")) else self.max_body
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _too_large(send, limit)
            return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await _too_large(send, limit)


async def _too_large(send: Send, limit: int) -> None:
    body = f'{{"detail":"request body is larger than the limit of {limit} bytes"}}'.encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
