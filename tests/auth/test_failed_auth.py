"""Failed authentications are limited per client address: while its bucket is spent, only tokens the service issued
are read."""

from fastapi.testclient import TestClient

from app.auth.ratelimit import RateLimiter
from tests.conftest import AUTH

WRONG = {"Authorization": "Bearer dbk_a-wrong-guess"}


def _register(client: TestClient, headers: dict[str, str], forwarded_for: str | None = None) -> object:
    extra = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    body = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "b"}]}
    return client.post("/api/v1/workers", json=body, headers=headers | extra)


def _answer(response) -> tuple:
    return response.status_code, response.json().get("detail"), response.headers.get("retry-after")


def test_a_spent_failed_auth_bucket_refuses_the_right_secret_too(make_client) -> None:
    limited = make_client(failed_auth_per_minute=3)
    now = [0.0]
    limited.app.state.failed_auth_limiter = RateLimiter(3, clock=lambda: now[0])
    assert [_register(limited, WRONG).status_code for _ in range(3)] == [401, 401, 401]
    # The bucket is spent: the right secret, a wrong one, another guess and none at all get one answer.
    answers = [_answer(_register(limited, h)) for h in (AUTH, WRONG, {"Authorization": "Bearer guess"}, {})]
    assert answers[0][0] == 429 and int(answers[0][2]) >= 1 and "failed authentications" in answers[0][1]
    assert answers == [answers[0]] * 4
    # Refilled (one failure in 20 s at 3 a minute), the right secret passes and is not counted.
    now[0] = 20.0
    assert [_register(limited, AUTH).status_code, _register(limited, WRONG).status_code] == [201, 401]
    assert _answer(_register(limited, AUTH))[:2] == (429, answers[0][1])


def test_a_flood_of_bad_tokens_from_a_shared_address_never_locks_out_the_issued_tokens_behind_it(make_client) -> None:
    limited = make_client(failed_auth_per_minute=3)
    limited.app.state.failed_auth_limiter = RateLimiter(3, clock=lambda: 0.0)
    issued = limited.post("/api/v1/tokens", json={"name": "fleet", "scopes": ["worker"]}, headers=AUTH).json()["secret"]
    assert [_register(limited, WRONG).status_code for _ in range(4)] == [401, 401, 401, 429]
    # 256 random bits cannot be guessed at any rate: the issued token still works, and is not counted.
    assert [_register(limited, {"Authorization": f"Bearer {issued}"}).status_code for _ in range(2)] == [201, 201]
    # A wrong issued-looking token, and the bootstrap token a person chose, still wait for the bucket.
    assert [_register(limited, h).status_code for h in (WRONG, AUTH)] == [429, 429]


def test_forwarded_for_is_read_only_from_a_trusted_proxy(make_client) -> None:
    # No proxy trusted (the default): a forged header from loopback gets no fresh bucket.
    direct = make_client(peer="127.0.0.1", failed_auth_per_minute=2)
    assert [_register(direct, WRONG, f"198.51.100.{n}").status_code for n in (1, 2, 3)] == [401, 401, 429]
    behind = make_client(peer="10.0.0.5", failed_auth_per_minute=2, trusted_proxies="10.0.0.0/8")
    assert [_register(behind, WRONG, "198.51.100.7").status_code for _ in range(2)] == [401, 401]
    # The right-most address that is not a trusted proxy is the client, whatever the client wrote to its left.
    for forwarded in ("198.51.100.7", "203.0.113.9, 198.51.100.7", "198.51.100.7, 10.0.0.9", "garbage, 198.51.100.7"):
        assert _register(behind, WRONG, forwarded).status_code == 429, forwarded
    assert _register(behind, WRONG, "198.51.100.8").status_code == 401  # another client, its own bucket
    # A peer outside the trusted networks is counted by its own address, whatever it forwards.
    stranger = make_client(peer="192.0.2.1", failed_auth_per_minute=2, trusted_proxies="10.0.0.0/8")
    assert [_register(stranger, WRONG, f"198.51.100.{n}").status_code for n in (10, 11, 12)] == [401, 401, 429]


def test_failed_authentications_have_their_own_lower_limit(make_client) -> None:
    # The writes' limit (600 a minute by default) is no bar to guessing: the failures' own is 30.
    client = make_client()
    assert [_register(client, WRONG).status_code for _ in range(31)] == [401] * 30 + [429]
    # A token's writes spend its own bucket, not the address's failures (and the reverse).
    other = make_client(peer="192.0.2.7", failed_auth_per_minute=2, rate_limit_per_minute=600)
    assert [_register(other, AUTH).status_code for _ in range(3)] == [201] * 3
    assert [_register(other, WRONG).status_code for _ in range(3)] == [401, 401, 429]
