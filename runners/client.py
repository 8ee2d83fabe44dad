"""The worker's HTTP client for the service: the only place a worker talks to the network."""

import logging
import time
from typing import Any

import httpx

from app.schemas.cell import JobOutcome
from app.schemas.worker import ClaimedJob, CompleteRequest, HeartbeatRequest, RegisterRequest, WorkerRegistered

log = logging.getLogger("draftbench.worker")


class ServiceRefused(Exception):
    """The service answered 4xx: the request itself is wrong (a bad token, a refused value); retrying cannot help."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"the service refused it ({status}): {detail}")
        self.status = status
        self.detail = detail


class JobLost(ServiceRefused):
    """The service no longer lets us hold this job (409): drop it, its newer attempt stands."""


class ServiceUnreachable(RuntimeError):
    """The service kept failing (no answer, 5xx, 429) for the whole retry window."""


class ServiceClient:
    """Retries while the service or its database is away, so a restart loses no result.

    It starts with the host's token, which only registers; ``register`` switches it to the worker's
    own credential, which every later call needs.
    """

    def __init__(
        self,
        server: str,
        token: str,
        *,
        retry_for_s: float = 600.0,
        timeout_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(
            base_url=server.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
            transport=transport,
        )
        self._retry_for_s = retry_for_s

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        deadline = time.monotonic() + self._retry_for_s
        delay = 0.5
        while True:
            try:
                response = self._http.request(method, url, **kwargs)
            except httpx.TransportError as exc:
                failure = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code < 400:
                    return response
                if response.status_code < 500 and response.status_code != 429:
                    refused = JobLost if response.status_code == 409 else ServiceRefused
                    raise refused(response.status_code, detail_of(response))
                failure = f"HTTP {response.status_code}: {response.text[:200]}"
            if time.monotonic() > deadline:
                raise ServiceUnreachable(f"{method} {url} kept failing for {self._retry_for_s:.0f} s: {failure}")
            # Rate limited: the service says when to come back.
            wait = _retry_after(response) if failure.startswith("HTTP 429") else delay
            log.warning("%s %s failed (%s); retrying in %.1f s", method, url, failure, wait)
            time.sleep(wait)
            delay = min(delay * 2, 15.0)

    def register(self, request: RegisterRequest) -> WorkerRegistered:
        """Register, then act as the new worker: its credential replaces the host's token."""
        registered = WorkerRegistered.model_validate(
            self._call("POST", "/api/v1/workers", json=request.model_dump(mode="json")).json()
        )
        self._http.headers["Authorization"] = f"Bearer {registered.credential}"
        return registered

    def claim(self, worker_id: int) -> ClaimedJob | None:
        response = self._call("POST", f"/api/v1/workers/{worker_id}/claim")
        return None if response.status_code == 204 else ClaimedJob.model_validate(response.json())

    def heartbeat(self, worker_id: int, job_ids: list[int]) -> list[int]:
        body = HeartbeatRequest(job_ids=job_ids).model_dump()
        return self._call("POST", f"/api/v1/workers/{worker_id}/heartbeat", json=body).json()["stop"]

    def upload_log(self, job_id: int, text: str) -> None:
        self._call(
            "PUT",
            f"/api/v1/jobs/{job_id}/log",
            content=text.encode(),
            headers={"content-type": "text/plain; charset=utf-8"},
        )

    def complete(self, job_id: int, outcome: JobOutcome) -> None:
        body = CompleteRequest(outcome=outcome).model_dump(mode="json")
        self._call("POST", f"/api/v1/jobs/{job_id}/complete", json=body)


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(0.1, float(response.headers.get("Retry-After", "1")))
    except ValueError:
        return 1.0


def detail_of(response: httpx.Response) -> str:
    """The service's own words for an error answer, on one line."""
    try:
        detail = response.json()["detail"]
    except (ValueError, KeyError, TypeError):
        return " ".join(response.text.split())[:500] or response.reason_phrase
    if isinstance(detail, list):
        return "; ".join(
            f"{'.'.join(str(part) for part in item.get('loc', [])[1:]) or 'body'}: {item.get('msg')}" for item in detail
        )
    return str(detail)
