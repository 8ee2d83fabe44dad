"""The worker's client rides out a rate limit and a service outage, and drops a job it lost."""

import httpx
import pytest

from app.schemas.worker import RegisterRequest
from runners.client import JobLost, ServiceClient, ServiceRefused


def _client(responses: list[httpx.Response]) -> tuple[ServiceClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return responses.pop(0)

    return ServiceClient("http://service", "t", retry_for_s=30, transport=httpx.MockTransport(handler)), seen


def test_rate_limit_is_waited_out_as_the_service_asks() -> None:
    client, seen = _client([httpx.Response(429, headers={"Retry-After": "0.2"}), httpx.Response(204)])
    assert client.claim(7) is None
    assert len(seen) == 2 and seen[0].headers["Authorization"] == "Bearer t"


def test_server_errors_are_retried_until_the_service_answers() -> None:
    client, seen = _client([httpx.Response(503), httpx.Response(500), httpx.Response(200, json={"stop": [3]})])
    assert client.heartbeat(1, [3]) == [3]
    assert len(seen) == 3


def test_conflict_means_the_job_moved_on() -> None:
    client, _ = _client([httpx.Response(409, json={"detail": "job 3 is not held by worker 1"})])
    with pytest.raises(JobLost, match="not held"):
        client.upload_log(3, "log")


def test_a_client_error_is_not_retried_and_carries_the_services_words() -> None:
    client, seen = _client([httpx.Response(422, json={"detail": [{"loc": ["body", "outcome"], "msg": "bad"}]})])
    with pytest.raises(ServiceRefused, match="outcome: bad"):
        client.claim(1)
    assert len(seen) == 1


def test_registering_switches_to_the_workers_own_credential() -> None:
    registered = {"id": 4, "name": "w", "host": "h", "gpu_kinds": ["cpu"], "gpu_count": 0, "builds": ["b"],
                  "registered_at": "2026-11-30T00:00:00Z", "last_heartbeat_at": "2026-11-30T00:00:00Z",
                  "alive": True, "credential": "dbk_own", "lease_seconds": 120}
    client, seen = _client([httpx.Response(201, json=registered), httpx.Response(204)])
    request = RegisterRequest(name="w", host="h", gpu_kinds=["cpu"], builds=[{"label": "b"}])
    assert client.register(request).id == 4
    client.claim(4)
    assert [r.headers["Authorization"] for r in seen] == ["Bearer t", "Bearer dbk_own"]


def test_a_claim_from_a_service_that_sends_the_spec_as_cell_is_read() -> None:
    # Services before the cell spec was named spec answered a claim with it under "cell" alone.
    old = {"job_id": 3, "sweep_id": 1, "attempt": 1, "cell": {"build": "b"}, "gpus_needed": 0}
    client, _ = _client([httpx.Response(200, json=old)])
    assert client.claim(4).spec == {"build": "b"}
