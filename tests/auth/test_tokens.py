"""API tokens: hashed at rest, scopes enforced on every write, revocation, the CLI, the rate limit."""

import hashlib

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from typer.testing import CliRunner

from app.auth.ratelimit import RateLimiter
from app.cli.main import cli
from app.models import ApiToken, Sweep
from tests.conftest import AUTH
from tests.factories import register_worker, sweep_body


def _token(client: TestClient, *scopes: str, name: str = "t") -> dict[str, str]:
    """A new database token with these scopes, as request headers."""
    response = client.post("/api/v1/tokens", json={"name": name, "scopes": list(scopes)}, headers=AUTH)
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['secret']}"}


def _token_id(client: TestClient, name: str) -> int:
    [token] = [t for t in client.get("/api/v1/tokens", headers=AUTH).json() if t["name"] == name]
    return token["id"]


def _submit(client: TestClient, headers: dict[str, str], dataset) -> object:
    return client.post("/api/v1/sweeps", json=sweep_body(dataset), headers=headers)


def test_only_the_hash_is_stored_and_the_secret_is_shown_once(client) -> None:
    created = client.post("/api/v1/tokens", json={"name": "ci", "scopes": ["submit"]}, headers=AUTH).json()
    secret = created["secret"]
    assert secret.startswith("dbk_") and len(secret) > 40
    with client.app.state.sessionmaker() as session:
        row = session.scalars(select(ApiToken)).one()
    assert row.hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in repr(vars(row)) and row.scopes == ["submit"]
    listed = client.get("/api/v1/tokens", headers=AUTH).json()
    assert [t["name"] for t in listed] == ["ci"] and "secret" not in listed[0]


def test_a_submit_token_submits_but_cannot_act_as_a_worker(client, dataset) -> None:
    worker = register_worker(client)
    submitter = _token(client, "submit")
    assert _submit(client, submitter, dataset).status_code == 201
    for method, path in (("post", f"/api/v1/workers/{worker.id}/claim"), ("post", "/api/v1/workers"),
                         ("post", "/api/v1/jobs/1/complete"), ("put", "/api/v1/jobs/1/log")):
        response = client.request(method, path, headers=submitter, json={})
        assert response.status_code == 403, (path, response.text)
        assert "'worker' scope" in response.json()["detail"]


def test_a_worker_token_works_but_cannot_submit_or_manage_tokens(client, dataset) -> None:
    register_worker(client)
    assert _submit(client, AUTH, dataset).status_code == 201
    worker_token = _token(client, "worker")
    worker = client.post("/api/v1/workers", json={"name": "w", "host": "h", "gpu_kinds": ["cpu"],
                                                  "builds": [{"label": "vllm-test"}]}, headers=worker_token)
    assert worker.status_code == 201
    credential = {"Authorization": f"Bearer {worker.json()['credential']}"}
    assert client.post(f"/api/v1/workers/{worker.json()['id']}/claim", headers=credential).status_code == 200
    refused = _submit(client, worker_token, dataset)
    assert refused.status_code == 403 and "'submit' scope" in refused.json()["detail"]
    assert "worker" in refused.json()["detail"]  # the scopes it has
    assert client.get("/api/v1/tokens", headers=worker_token).status_code == 403
    assert client.post("/api/v1/tokens", json={"name": "x", "scopes": ["admin"]}, headers=worker_token).status_code == 403


def test_an_admin_token_may_do_everything_but_act_as_a_worker(client, dataset) -> None:
    admin = _token(client, "admin")
    worker = register_worker(client, headers=admin)
    sweep = _submit(client, _token(client, "submit"), dataset).json()["id"]
    assert client.post(f"/api/v1/workers/{worker.id}/claim", headers=admin).status_code == 403
    assert client.post(f"/api/v1/workers/{worker.id}/claim", headers=worker.headers).status_code == 200
    assert client.post(f"/api/v1/sweeps/{sweep}/cancel", headers=admin).status_code == 200
    assert client.get("/api/v1/tokens", headers=admin).status_code == 200


def test_a_submitter_cancels_only_its_own_sweeps(client, dataset) -> None:
    register_worker(client)
    alice, bob = _token(client, "submit", name="alice"), _token(client, "submit", name="bob")
    sweep = _submit(client, alice, dataset).json()["id"]
    refused = client.post(f"/api/v1/sweeps/{sweep}/cancel", headers=bob)
    assert refused.status_code == 403 and "admin" in refused.json()["detail"]
    assert client.post(f"/api/v1/sweeps/{sweep}/cancel", headers=alice).json()["state"] == "cancelled"
    # The bootstrap token is an admin: it cancels anyone's sweep (and its own have no token id).
    other = _submit(client, bob, dataset).json()["id"]
    assert client.post(f"/api/v1/sweeps/{other}/cancel", headers=AUTH).status_code == 200
    with client.app.state.sessionmaker() as session:
        owners = {s.created_by_token_id for s in session.scalars(select(Sweep))}
    assert owners == {_token_id(client, "alice"), _token_id(client, "bob")}


def test_revoked_unknown_and_missing_tokens_get_401(client, dataset) -> None:
    register_worker(client)
    submitter = _token(client, "submit", name="to-revoke")
    assert client.delete(f"/api/v1/tokens/{_token_id(client, 'to-revoke')}", headers=AUTH).json()["revoked_at"] is not None
    revoked = _submit(client, submitter, dataset)
    assert revoked.status_code == 401 and "revoked" in revoked.json()["detail"]
    assert _submit(client, {"Authorization": "Bearer dbk_not-a-token"}, dataset).status_code == 401
    missing = client.post("/api/v1/sweeps", json=sweep_body(dataset))
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert client.delete("/api/v1/tokens/9999", headers=AUTH).status_code == 404


def test_bad_token_requests_get_422(client) -> None:
    for body in ({"name": "x", "scopes": []}, {"name": "x", "scopes": ["root"]}, {"name": "", "scopes": ["submit"]}):
        assert client.post("/api/v1/tokens", json=body, headers=AUTH).status_code == 422


def test_cli_creates_a_working_token_lists_and_revokes_it(client, db_url, dataset) -> None:
    register_worker(client)
    runner = CliRunner()
    created = runner.invoke(cli, ["token", "create", "--name", "ci", "--scope", "submit", "--database-url", db_url])
    assert created.exit_code == 0, created.output
    secret = created.output.strip().splitlines()[-1]
    assert secret.startswith("dbk_")
    assert _submit(client, {"Authorization": f"Bearer {secret}"}, dataset).status_code == 201
    listed = runner.invoke(cli, ["token", "list", "--database-url", db_url])
    assert listed.exit_code == 0 and "ci" in listed.output and secret not in listed.output
    revoked = runner.invoke(cli, ["token", "revoke", str(_token_id(client, "ci")), "--database-url", db_url])
    assert revoked.exit_code == 0, revoked.output
    assert _submit(client, {"Authorization": f"Bearer {secret}"}, dataset).status_code == 401
    unknown = runner.invoke(cli, ["token", "create", "--name", "x", "--scope", "root", "--database-url", db_url])
    assert unknown.exit_code != 0


def test_rate_limit_per_token_answers_429_with_retry_after(make_client) -> None:
    limited = make_client(rate_limit_per_minute=3)
    worker_token = _token(limited, "worker")  # the bootstrap token's first request
    body = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "b"}]}
    answers = [limited.post("/api/v1/workers", json=body, headers=worker_token) for _ in range(4)]
    assert [a.status_code for a in answers] == [201, 201, 201, 429]
    assert int(answers[-1].headers["retry-after"]) >= 1 and "3 requests a minute" in answers[-1].json()["detail"]
    # Another token has its own bucket; reads are not limited.
    assert limited.post("/api/v1/workers", json=body, headers=AUTH).status_code == 201
    assert limited.get("/api/v1/workers").status_code == 200


def test_rate_limiter_refills_at_its_rate() -> None:
    now = [0.0]
    limiter = RateLimiter(60, clock=lambda: now[0])  # one a second, bursts of 60
    assert all(limiter.take("a") == 0.0 for _ in range(60))
    assert limiter.take("a") == pytest.approx(1.0)
    now[0] = 2.5
    assert limiter.take("a") == 0.0 and limiter.take("a") == 0.0
    assert limiter.take("a") == pytest.approx(0.5)
    assert limiter.take("b") == 0.0
    assert RateLimiter(0).take("a") == 0.0


def test_a_scope_listed_twice_or_too_many_scopes_is_422_naming_scopes(client) -> None:
    # Before: ["submit"] * 100000 made a token (the list was unbounded), and a scope twice passed unremarked.
    for scopes in (["submit", "submit"], ["submit"] * 100_000):
        response = client.post("/api/v1/tokens", json={"name": "x", "scopes": scopes}, headers=AUTH)
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"][:2] == ["body", "scopes"]
    assert client.get("/api/v1/tokens", headers=AUTH).json() == []
