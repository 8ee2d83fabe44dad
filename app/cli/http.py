"""The CLI's client for the service: every failure becomes one CliError sentence, with no secret in it."""

import time
from typing import Any

import httpx

from app.cli.errors import CliError, redact
from runners.client import detail_of


class Api:
    """A few calls to the service; ``token`` only where the command writes.

    ``server`` is the address as it may be printed (and linked to): without the URL's userinfo. The client
    itself talks to the address as given.
    """

    def __init__(self, server: str, token: str | None = None, *, timeout_s: float = 60.0) -> None:
        if token is not None and not token.strip():
            raise CliError("no token: set DRAFTBENCH_TOKEN or pass --token (`draftbench token create` makes one)")
        self.server = redact(server.rstrip("/"))
        self._secrets = (token or "",)
        try:
            url: httpx.URL | None = httpx.URL(server)
        except httpx.InvalidURL:
            url = None
        if url is None or url.scheme not in ("http", "https") or not url.host:
            raise CliError(f"the service's address must be an http:// or https:// URL with a host, got {self.server!r} "
                           "(--server or DRAFTBENCH_SERVER)")
        if token is not None and url.userinfo:
            # httpx sends a URL's userinfo as Basic authentication, in place of the bearer token.
            raise CliError(f"the service's address {self.server!r} carries credentials before its host, which would "
                           "be sent in place of the token: give the address without them (--server or DRAFTBENCH_SERVER)")
        headers = {"Authorization": f"Bearer {token.strip()}"} if token is not None else {}
        self._http = httpx.Client(base_url=server.rstrip("/"), headers=headers, timeout=timeout_s)

    def __enter__(self) -> "Api":
        return self

    def __exit__(self, *_: object) -> None:
        self._http.close()

    def get(self, path: str, **params: Any) -> Any:
        return self.send("GET", path, params=params).json()

    def send(self, method: str, path: str, *, attempts: int = 4, **kwargs: Any) -> httpx.Response:
        """The response, waiting out rate limits (Retry-After); CliError for anything but success."""
        for attempt in range(attempts):
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                raise self._error(
                    f"cannot reach the service at {self.server} ({type(exc).__name__}: {exc or 'no answer'}); "
                    "is `draftbench serve` running there? (--server or DRAFTBENCH_SERVER)"
                ) from exc
            if response.status_code == 429 and attempt + 1 < attempts:
                time.sleep(_retry_after(response))
                continue
            if response.status_code == 401:
                raise self._error(
                    f"the service at {self.server} refused the token (401: {detail_of(response)}); "
                    "check DRAFTBENCH_TOKEN or --token"
                )
            if response.status_code >= 400:
                raise self._error(f"{method} {path} refused ({response.status_code}): {detail_of(response)}")
            return response
        raise AssertionError("unreachable")

    def _error(self, message: str) -> CliError:
        """A CliError whose message shows neither the token nor a URL's password, whatever the service said."""
        return CliError(redact(message, *self._secrets))


def _retry_after(response: httpx.Response) -> float:
    try:
        return min(60.0, max(0.5, float(response.headers.get("Retry-After", "1"))))
    except ValueError:
        return 1.0
