"""Open regressions from each cell's history across builds: listed, acknowledged with a reason, counted in /metrics."""

import hashlib
import json
from pathlib import Path

from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import text

from app import db
from tests.conftest import AUTH
from tests.factories import run_history


def _open(client: TestClient) -> str:
    lines = [line for line in client.get("/metrics").text.splitlines() if line.startswith("draftbench_alerts_open{")]
    return " ".join(sorted(lines))


def test_a_drop_that_stays_is_an_alert_naming_its_first_build_until_acknowledged(client: TestClient, dataset: Path) -> None:
    run_history(client, dataset, [100.0, 101.0, 99.0, 100.0, 70.0, 71.0])
    [alert] = client.get("/api/v1/alerts").json()
    assert (alert["metric"], alert["first_bad_build"], alert["last_good_build"], alert["latest_build"]) == (
        "tokens_per_s", "b4", "b3", "b5")
    assert alert["before"] == 100.0 and alert["after"] == 70.5 and alert["builds"] == 6 and not alert["acknowledged"]
    assert 'draftbench_alerts_open{metric="tokens_per_s"} 1.0' in _open(client)

    acked = client.post(f"/api/v1/alerts/{alert['id']}/ack", json={"reason": "b4 trades speed for memory (vllm#123)"}, headers=AUTH)
    assert acked.status_code == 200 and acked.json()["ack_reason"] == "b4 trades speed for memory (vllm#123)"
    assert client.get("/api/v1/alerts").json() == []
    assert [a["id"] for a in client.get("/api/v1/alerts?state=acknowledged").json()] == [alert["id"]]
    assert 'draftbench_alerts_open{metric="tokens_per_s"} 0.0' in _open(client)
    again = client.post(f"/api/v1/alerts/{alert['id']}/ack", json={"reason": "again"}, headers=AUTH)
    assert again.status_code == 409 and "b4 trades speed" in again.json()["detail"]


def test_a_drop_that_recovered_or_noise_is_no_alert(client: TestClient, dataset: Path) -> None:
    run_history(client, dataset, [100.0, 101.0, 70.0, 71.0, 100.0, 101.0])
    assert client.get("/api/v1/alerts?state=all").json() == []


def test_acceptance_drops_are_alerts_too(client: TestClient, dataset: Path) -> None:
    run_history(client, dataset, [100.0] * 6, accepted=[30, 30, 30, 30, 10, 10])
    [alert] = client.get("/api/v1/alerts").json()
    assert (alert["metric"], alert["first_bad_build"], alert["before"], alert["after"]) == ("acceptance", "b4", 0.5, 10 / 60)


def test_acknowledging_needs_a_token_a_reason_and_an_open_alert(client: TestClient) -> None:
    assert client.post("/api/v1/alerts/0123456789abcdef/ack", json={"reason": "x"}).status_code == 401
    missing = client.post("/api/v1/alerts/0123456789abcdef/ack", json={"reason": "x"}, headers=AUTH)
    assert missing.status_code == 404 and "open alert 0123456789abcdef not found" in missing.text
    no_reason = client.post("/api/v1/alerts/0123456789abcdef/ack", json={"reason": ""}, headers=AUTH)
    assert no_reason.status_code == 422 and "reason" in no_reason.text
    assert client.get("/api/v1/alerts?state=closed").status_code == 422


def test_an_acknowledgement_under_its_alerts_old_id_follows_it_to_the_new_one(client: TestClient, dataset: Path) -> None:
    # Before alerts were keyed by measured identity, an alert's cell was the digest of its whole config but
    # the build, matrix axes and timeout: migration 0015 moves a stored acknowledgement to its alert's new id.
    run_history(client, dataset, [100.0, 101.0, 99.0, 100.0, 70.0, 71.0])
    alert = client.get("/api/v1/alerts").json()[0]
    alert_id, build = alert["id"], alert["first_bad_build"]
    client.post(f"/api/v1/alerts/{alert_id}/ack", json={"reason": "known"}, headers=AUTH).raise_for_status()
    engine = client.app.state.engine
    with engine.begin() as conn:
        configs = [json.loads(c) if isinstance(c, str) else c for (c,) in conn.execute(text("SELECT config FROM jobs"))]
        first_bad = next(c for c in configs if c["build"] == build)
        rest = {k: v for k, v in first_bad.items() if k not in ("build", "gpu_kind", "backend", "graph_mode", "timeout_s")}
        old_variant = hashlib.sha256(json.dumps(rest, sort_keys=True, default=str).encode()).hexdigest()[:12]
        key = ("tokens_per_s", first_bad["gpu_kind"], first_bad["backend"], first_bad["graph_mode"], old_variant, build)
        conn.execute(text("UPDATE alert_acks SET alert_id = :old"), {"old": hashlib.sha256(repr(key).encode()).hexdigest()[:16]})
    assert client.get("/api/v1/alerts?state=acknowledged").json() == []
    url = str(engine.url.render_as_string(hide_password=False))
    command.downgrade(db.alembic_config(url), "0014")
    db.upgrade(url)
    assert [a["id"] for a in client.get("/api/v1/alerts?state=acknowledged").json()] == [alert_id]
