"""Admission control: at most a pool's worth of requests inside the app at once, the rest in line."""

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class AdmissionMiddleware:
    """Let ``limit`` requests into the app at once; the others wait their turn in arrival order.

    A request can hold a pooled connection while it waits for a thread between its dependencies and
    its route. Admit more requests than the pool holds and every thread can end up waiting on the pool
    for connections that requests queued for a thread are holding: nothing moves until the pool's
    timeout fails them. With ``limit`` equal to the pool and the thread limit, neither wait happens,
    and under saturation requests queue here, first come first served.

    A slot is given back when the response starts: the request's session is closed by then.
    """

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit
        self._slots: anyio.Semaphore | None = None  # made on the server's event loop, at the first request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._slots is None:
            self._slots = anyio.Semaphore(self.limit)
        slots = self._slots
        await slots.acquire()
        held = True

        def give_back() -> None:
            nonlocal held
            if held:
                held = False
                slots.release()

        async def send_and_give_back(message: Message) -> None:
            if message["type"] == "http.response.start":
                give_back()
            await send(message)

        try:
            await self.app(scope, receive, send_and_give_back)
        finally:
            give_back()
