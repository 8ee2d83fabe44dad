"""The alerts last found, stored: a fresh process's pages show them without reading every cell's history again."""

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.alerts import service
from app.db import session_scope
from app.models import AlertSnapshot
from tests.conftest import AUTH
from tests.factories import run_history


def _fresh_process_that_cannot_find(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget what this process found, and fail any reading of the histories."""
    monkeypatch.setattr(service, "_OPEN", {})

    def find(*, session):
        raise AssertionError("the histories were read")

    monkeypatch.setattr(service, "find", find)


def _regressions(html: str) -> str:
    [item] = re.findall(r'<ul id="regressions">(.*?)</ul>', html, re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", item).split())


def _snapshots(client: TestClient) -> list[AlertSnapshot]:
    with session_scope(client.app.state.sessionmaker) as session:
        rows = list(session.scalars(select(AlertSnapshot).order_by(AlertSnapshot.id)))
        session.expunge_all()
    return rows


def test_a_fresh_processs_first_view_shows_the_stored_alerts_without_reading_the_histories(
        client: TestClient, dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_history(client, dataset, [100.0, 101.0, 99.0, 100.0, 70.0, 71.0])
    service.refresh(client.app.state.sessionmaker)
    [snapshot] = _snapshots(client)
    _fresh_process_that_cannot_find(monkeypatch)
    page = client.get("/").text
    assert "tokens/s cpu · ngram k=3 · CPU_ATTN · NONE: 100 → 70 (-29.5 %) from build b4 on" in _regressions(page)
    assert f'id="regressions-as-of">As of {snapshot.computed_at:%Y-%m-%d %H:%M:%S} UTC' in page
    # The key is current: /metrics and the API answer from the stored alerts too.
    assert 'draftbench_alerts_open{metric="tokens_per_s"} 1.0' in client.get("/metrics").text
    [alert] = client.get("/api/v1/alerts").json()
    assert (alert["first_bad_build"], alert["latest_build"], alert["builds"]) == ("b4", "b5", 6)


def test_an_acknowledgement_after_the_snapshot_leaves_the_page_at_once(
        client: TestClient, dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_history(client, dataset, [100.0, 101.0, 99.0, 100.0, 70.0, 71.0])
    service.refresh(client.app.state.sessionmaker)
    _fresh_process_that_cannot_find(monkeypatch)
    [alert] = client.get("/api/v1/alerts").json()
    assert client.post(f"/api/v1/alerts/{alert['id']}/ack", json={"reason": "expected"}, headers=AUTH).status_code == 200
    assert 'id="regressions-empty"' in client.get("/").text
    assert [a["id"] for a in client.get("/api/v1/alerts?state=acknowledged").json()] == [alert["id"]]


def test_a_stale_snapshot_is_shown_with_its_time_until_the_schedule_finds_them_again(
        client: TestClient, dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_history(client, dataset, [100.0, 101.0, 99.0, 100.0])
    service.refresh(client.app.state.sessionmaker)
    [old] = _snapshots(client)
    assert old.alerts == []
    run_history(client, dataset, [100.0, 101.0, 99.0, 100.0, 70.0, 71.0])
    find = service.find
    _fresh_process_that_cannot_find(monkeypatch)
    page = client.get("/").text
    assert 'id="regressions-empty"' in page and f"As of {old.computed_at:%Y-%m-%d %H:%M:%S} UTC" in page
    monkeypatch.setattr(service, "find", find)
    service.refresh(client.app.state.sessionmaker)
    [new] = _snapshots(client)
    with session_scope(client.app.state.sessionmaker) as session:
        assert (new.finished_jobs, new.newest_finish) == service._key(session)
    assert new.computed_at > old.computed_at and [a["first_bad_build"] for a in new.alerts] == ["b4"]
    assert "from build b4 on" in _regressions(client.get("/").text)


def test_refreshing_an_unchanged_key_writes_nothing(client: TestClient, dataset: Path) -> None:
    run_history(client, dataset, [100.0, 101.0, 99.0, 100.0, 70.0, 71.0])
    service.refresh(client.app.state.sessionmaker)
    [first] = _snapshots(client)
    service.refresh(client.app.state.sessionmaker)
    assert [(s.id, s.computed_at) for s in _snapshots(client)] == [(first.id, first.computed_at)]


def test_a_process_behind_takes_the_alerts_another_process_stored_for_the_current_key(
        client: TestClient, dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_history(client, dataset, [100.0, 101.0, 99.0, 100.0])
    service.refresh(client.app.state.sessionmaker)
    behind = dict(service._OPEN)
    run_history(client, dataset, [100.0, 101.0, 99.0, 100.0, 70.0, 71.0])
    service.refresh(client.app.state.sessionmaker)  # "another process": the stored snapshot is current
    _fresh_process_that_cannot_find(monkeypatch)
    monkeypatch.setattr(service, "_OPEN", behind)
    assert [a["first_bad_build"] for a in client.get("/api/v1/alerts").json()] == ["b4"]
