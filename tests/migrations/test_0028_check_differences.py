"""0028 on both databases: stored alarm checks keep what decided them; those stored before it get the difference where
their rows hold it (an alarm's) and are said to be unknown elsewhere, until their build is judged again."""

import re
from pathlib import Path

import pytest
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import inspect, text

from app import db
from app.alarms import service as alarms
from tests.alarms.pairs import graphed_pair

DECIDED = {"kind", "difference", "difference_low", "difference_high", "min_effect"}
# 2400 of 6000 against 3000: -0.1 [-0.117662, -0.082249] (tests/alarms/test_reasons.py by hand).
ALARM = (-0.1, -0.117662, -0.082249)


def _stored_at_0027(client: TestClient, dataset: Path) -> str:
    """A build of each outcome judged and stored, then the database taken down to 0027 and up again; its URL."""
    graphed_pair(client, dataset, "b-bug", {"NONE": 3000, "PIECEWISE": 2400})
    graphed_pair(client, dataset, "b-near", {"NONE": 6000, "PIECEWISE": 5950})  # below the minimum effect
    graphed_pair(client, dataset, "b-held", {"NONE": 3000, "PIECEWISE": 3010})  # within the interval
    url = client.app.state.engine.url.render_as_string(hide_password=False)
    command.downgrade(db.alembic_config(url), "0027")
    with client.app.state.engine.connect() as conn:
        assert not DECIDED & {c["name"] for c in inspect(conn).get_columns("alarm_checks")}
    db.upgrade(url)
    return url


def _checks(client: TestClient) -> dict[str, dict]:
    return {c["build"]: c for c in client.get("/api/v1/alarms/checks").json()}


def test_an_alarm_stored_before_0028_gets_its_alarms_difference_and_the_rest_are_unknown(client: TestClient, dataset: Path) -> None:
    _stored_at_0027(client, dataset)
    checks = _checks(client)
    bug = checks["b-bug"]
    assert (bug["outcome"], bug["reason"], bug["kind"], bug["min_effect"]) == ("alarm", "raised", "acceptance", 0.02)
    assert (bug["difference"], bug["difference_low"], bug["difference_high"]) == pytest.approx(ALARM, abs=1e-6)
    for build in ("b-near", "b-held"):
        assert (checks[build]["outcome"], checks[build]["reason"], checks[build]["difference"]) == ("within", "unknown", None)
        assert "not told apart until the build's next result or `draftbench rederive`" in checks[build]["sentence"]
    counts = client.get("/api/v1/alarms/counts").json()
    assert counts["within"] == 2 and counts["within_by_reason"] == {"within_interval": 0, "below_min_effect": 0, "unknown": 2}
    page = " ".join(re.sub(r"<[^>]+>", " ", client.get("/alarms").text).split()).replace(" ,", ",")
    assert "1 alarmed, 0 within the interval of their eager sibling, 2 not flagged but not told apart (judged before the " \
           "stored judgement kept their difference" in page


def test_judging_the_builds_again_tells_the_unknown_apart(client: TestClient, dataset: Path) -> None:
    # What `draftbench rederive` runs.
    _stored_at_0027(client, dataset)
    with db.session_scope(client.app.state.sessionmaker) as session:
        alarms.refresh_all(session=session)
    assert {b: c["reason"] for b, c in _checks(client).items()} == {
        "b-bug": "raised", "b-near": "below_min_effect", "b-held": "within_interval"}


def test_0028_goes_down_and_up_again_on_checks_that_kept_their_difference(client: TestClient, dataset: Path) -> None:
    url = _stored_at_0027(client, dataset)
    with db.session_scope(client.app.state.sessionmaker) as session:
        alarms.refresh_all(session=session)
    command.downgrade(db.alembic_config(url), "0027")
    db.upgrade(url)
    with client.app.state.engine.connect() as conn:
        kept = conn.execute(text("SELECT outcome, count(*) FROM alarm_checks WHERE difference IS NOT NULL GROUP BY outcome")).all()
    assert kept == [("alarm", 1)]
