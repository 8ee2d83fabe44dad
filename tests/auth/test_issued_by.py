"""Every token names the token that issued it, and is valid only while every token up its chain is."""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import command
from fastapi.testclient import TestClient

from app import db
from app.auth import service as tokens
from app.models import ApiToken
from tests.conftest import AUTH
from tests.factories import register_worker, sweep_body
from tests.statements import reads, recorded


def _token(client: TestClient, issuer: dict[str, str], *scopes: str, name: str) -> dict[str, str]:
    """A new token with these scopes, issued by ``issuer``'s token, as request headers."""
    response = client.post("/api/v1/tokens", json={"name": name, "scopes": list(scopes)}, headers=issuer)
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['secret']}"}


def _listed(client: TestClient) -> dict[str, dict]:
    return {t["name"]: t for t in client.get("/api/v1/tokens", headers=AUTH).json()}


def test_revoking_a_token_ends_every_token_issued_under_it(client, dataset) -> None:
    # bootstrap -> admin a (a root) -> admin b -> host token -> worker credential; b also issues a submitter.
    a = _token(client, AUTH, "admin", name="a")
    b = _token(client, a, "admin", name="b")
    host = _token(client, b, "worker", name="host")
    submitter = _token(client, b, "submit", name="submitter")
    worker = register_worker(client, headers=host)
    sibling = _token(client, AUTH, "submit", name="sibling")  # another root, issued by the bootstrap token
    under_a = (a, b, host, submitter, worker.headers)
    # Each is a live token before (201, or 403 for want of the submit scope), and none is after.
    before = [client.post("/api/v1/sweeps", json=sweep_body(dataset), headers=h).status_code for h in under_a]
    assert before == [201, 201, 403, 201, 403]
    assert client.post(f"/api/v1/workers/{worker.id}/claim", headers=worker.headers).status_code == 200
    listed = _listed(client)
    assert client.delete(f"/api/v1/tokens/{listed['a']['id']}", headers=AUTH).status_code == 200
    after = [client.post("/api/v1/sweeps", json=sweep_body(dataset), headers=h) for h in under_a]
    assert [r.status_code for r in after] == [401] * 5 and all("revoked" in r.json()["detail"] for r in after)
    assert client.post(f"/api/v1/workers/{worker.id}/heartbeat", json={"job_ids": []},
                       headers=worker.headers).status_code == 401
    # What the bootstrap token issued stands until revoked itself: it has no revocable issuer.
    assert client.post("/api/v1/sweeps", json=sweep_body(dataset), headers=sibling).status_code == 201
    # The chain, as the token list shows it.
    assert listed["a"]["issued_by_id"] is None and listed["sibling"]["issued_by_id"] is None
    assert listed["b"]["issued_by_id"] == listed["a"]["id"]
    assert listed["host"]["issued_by_id"] == listed["submitter"]["issued_by_id"] == listed["b"]["id"]
    assert listed[f"worker {worker.id} (w)"]["issued_by_id"] == listed["host"]["id"]


def test_a_chain_issues_no_deeper_than_its_bound_and_a_deeper_row_is_refused(client) -> None:
    chain = [_token(client, AUTH, "admin", name="t1")]
    for depth in range(2, tokens.MAX_CHAIN + 1):
        chain.append(_token(client, chain[-1], "admin", name=f"t{depth}"))
    deepest = chain[-1]
    assert client.get("/api/v1/tokens", headers=deepest).status_code == 200  # a full chain is valid
    refused = client.post("/api/v1/tokens", json={"name": "one-more", "scopes": ["submit"]}, headers=deepest)
    assert refused.status_code == 403 and str(tokens.MAX_CHAIN) in refused.json()["detail"]
    registered = client.post("/api/v1/workers", json={"name": "w", "host": "h", "gpu_kinds": ["cpu"],
                                                      "builds": [{"label": "vllm-test"}]}, headers=deepest)
    assert registered.status_code == 403 and str(tokens.MAX_CHAIN) in registered.json()["detail"]
    # A row written below the bound anyway (by hand, or in a race) cannot authenticate: its chain
    # does not reach a root within the bound, so nothing above it was checked.
    with client.app.state.sessionmaker() as session:
        issuer = session.scalar(sa.select(ApiToken.id).where(ApiToken.name == f"t{tokens.MAX_CHAIN}"))
        _, secret = tokens.create(session=session, name="too-deep", scopes=["admin"], issued_by=issuer)
        session.commit()
    assert client.get("/api/v1/tokens", headers={"Authorization": f"Bearer {secret}"}).status_code == 401


def test_authentication_reads_a_whole_chain_in_one_statement(client) -> None:
    # Authentication is on every worker call: a chain costs one query, not one a level.
    admin = _token(client, AUTH, "admin", name="admin")
    host = _token(client, admin, "worker", name="host")
    worker = register_worker(client, headers=host)  # bootstrap -> admin -> host -> this credential
    deepest = AUTH
    for depth in range(1, 8):
        deepest = _token(client, deepest, "admin", name=f"t{depth}")
    for headers in (worker.headers, deepest):
        secret = headers["Authorization"].removeprefix("Bearer ")
        with recorded(client.app.state.engine) as statements, client.app.state.sessionmaker() as session:
            principal = tokens.authenticate(session=session, secret=secret, bootstrap="")
        assert principal is not None
        assert len(reads(statements)) == 1
    assert principal.depth == 7


def test_credentials_that_registered_workers_before_the_chain_die_with_their_hosts_token(db_url) -> None:
    # Rows as the probe left them under revision 0011: host token H registered worker 1, whose
    # credential C1 registered worker 2 (credential C2). Migrated, C2 must die with H.
    command.upgrade(db.alembic_config(db_url), "0011")
    api_tokens = sa.table("api_tokens", *(sa.column(c) for c in ("id", "name", "hash", "created_at", "worker_id")),
                          sa.column("scopes", sa.JSON))
    workers = sa.table("workers", *(sa.column(c) for c in ("id", "name", "host", "gpu_count", "registered_at",
                                                           "last_heartbeat_at", "token_id")),
                       sa.column("gpu_kinds", sa.JSON), sa.column("builds", sa.JSON))
    now = datetime.now(UTC)
    secrets = {name: f"{tokens.PREFIX}{name}-secret" for name in ("h", "c1", "c2")}

    def token(ident: int, name: str, worker_id: int | None) -> dict:
        return {"id": ident, "name": name, "hash": tokens.hash_secret(secrets[name]), "created_at": now,
                "worker_id": worker_id, "scopes": ["worker"]}

    def worker(ident: int, token_id: int) -> dict:
        return {"id": ident, "name": "w", "host": "h", "gpu_count": 0, "registered_at": now, "last_heartbeat_at": now,
                "token_id": token_id, "gpu_kinds": ["cpu"], "builds": ["vllm-test"]}

    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(api_tokens.insert(), [token(1, "h", None)])
        conn.execute(workers.insert(), [worker(1, token_id=1)])
        conn.execute(api_tokens.insert(), [token(2, "c1", 1)])
        conn.execute(workers.insert(), [worker(2, token_id=2)])
        conn.execute(api_tokens.insert(), [token(3, "c2", 2)])
    engine.dispose()
    db.upgrade(db_url)
    engine = db.make_engine(db_url)
    sessions = db.make_sessionmaker(engine)
    with db.session_scope(sessions) as session:
        assert tokens.authenticate(session=session, secret=secrets["c2"], bootstrap="").worker_id == 2
        tokens.revoke(session=session, token_id=1)
    with db.session_scope(sessions) as session:
        assert [tokens.authenticate(session=session, secret=secrets[n], bootstrap="") for n in ("h", "c1", "c2")] == [
            None, None, None]
    engine.dispose()
