"""The graph-capture alarm judged per build and GPU kind and stored: what becomes of each graphed cell, and the store
kept current by the result-store path whatever sweeps come after."""

import threading
import time
from pathlib import Path

import pytest
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import select

from app import db
from app.alarms import service as alarms
from app.cells.scope import CellScope
from app.enums import CheckOutcome, CheckReason
from app.models import Job
from app.results import service as results
from app.schemas.cell import JobOutcome
from tests.alarms.pairs import graphed_pair, pair_result, pooled_cell
from tests.factories import claim, register_worker, submit, sweep_body


def test_a_degenerate_cell_cannot_show_a_bug_and_is_never_within_its_interval() -> None:
    cells = [
        # The target as its own draft at temperature 0: everything accepted, eager and graphed.
        pooled_cell("NONE", "draft_model", 15360, 15360, variant="self"),
        pooled_cell("PIECEWISE", "draft_model", 19620, 19620, variant="self"),
        # A random draft: nothing accepted either way.
        pooled_cell("NONE", "dflash", 0, 9000, variant="random"), pooled_cell("FULL", "dflash", 0, 9000, variant="random"),
        # A middle acceptance that held: it could have shown a bug, and did not.
        pooled_cell("NONE", "ngram", 3000, 6000, variant="middle"), pooled_cell("FULL", "ngram", 3010, 6000, variant="middle"),
        # The capture bug: 17852 of 19620 against 15360 of 15360 (app.analysis.alarms' hand-computed case).
        pooled_cell("NONE", "draft_model", 15360, 15360, variant="bug", build="b2"),
        pooled_cell("FULL_DECODE_ONLY", "draft_model", 17852, 19620, variant="bug", build="b2"),
        # No eager sibling ran.
        pooled_cell("FULL", "eagle3", 100, 300, variant="alone"),
        # Eager cells and baselines are not looked at.
        pooled_cell("NONE", None, 0, 0, variant="base"),
    ]
    judged = alarms.judge(cells)
    outcomes = {(c.build, c.method, c.graph_mode): c.outcome for c in judged.checks}
    assert outcomes == {
        ("b1", "draft_model", "PIECEWISE"): CheckOutcome.CANNOT_SHOW, ("b1", "dflash", "FULL"): CheckOutcome.CANNOT_SHOW,
        ("b1", "ngram", "FULL"): CheckOutcome.WITHIN, ("b2", "draft_model", "FULL_DECODE_ONLY"): CheckOutcome.ALARM,
        ("b1", "eagle3", "FULL"): CheckOutcome.UNPAIRED,
    }
    assert (judged.count("cannot_show"), judged.count("within"), judged.count("alarm"), judged.judged) == (2, 1, 1, 4)
    [alarm] = judged.alarms
    assert alarm.sentence.endswith("acceptance 0.910 against 1.000 eager on FLASH_ATTN, -9.0 points [-9.4, -8.6]")
    assert (alarm.cell.successes, alarm.cell.trials, alarm.sibling.successes, alarm.sibling.trials) == (17852, 19620, 15360, 15360)


def test_a_stored_result_judges_its_build_and_the_alarm_stays_shown_behind_newer_sweeps(client: TestClient, dataset: Path) -> None:
    sweep = graphed_pair(client, dataset, "b-bug", {"NONE": 3000, "PIECEWISE": 2400})
    [alarm] = client.get("/api/v1/alarms").json()
    assert (alarm["build"], alarm["graph_mode"], alarm["successes"], alarm["eager_successes"]) == ("b-bug", "PIECEWISE", 2400, 3000)
    assert alarm["sweep_ids"] == [sweep] and alarm["difference_high"] < -0.02
    # Ten newer sweeps of another build: the pages once read only the builds of the 10 newest.
    register_worker(client, builds=["b-later"])
    for _ in range(10):
        assert submit(client, sweep_body(dataset, build="b-later", repeats=1)).status_code == 201
    assert [a["build"] for a in client.get("/api/v1/alarms").json()] == ["b-bug"]
    assert "PIECEWISE (ngram k=3, b-bug): acceptance 0.400 against 0.500 eager" in client.get("/").text
    assert "PIECEWISE (ngram k=3, b-bug)" in client.get("/alarms").text
    assert client.get("/api/v1/alarms/counts").json() == {
        "scope": "every build", "alarmed": 1, "within": 0, "cannot_show": 0, "unpaired": 0, "judged": 1,
        "within_by_reason": {"within_interval": 0, "below_min_effect": 0, "unknown": 0}}
    # A second sweep of the build whose PIECEWISE cell accepts as the eager one: pooled, the drop is smaller.
    graphed_pair(client, dataset, "b-bug", {"NONE": 3000, "PIECEWISE": 3000})
    [pooled] = client.get("/api/v1/alarms").json()
    assert (pooled["successes"], pooled["trials"], len(pooled["sweep_ids"])) == (5400, 12000, 2)


def test_the_migration_judges_every_stored_build(client: TestClient, dataset: Path) -> None:
    graphed_pair(client, dataset, "b-bug", {"NONE": 3000, "PIECEWISE": 2400})
    graphed_pair(client, dataset, "b-fine", {"NONE": 6000, "PIECEWISE": 6000})
    url = client.app.state.engine.url.render_as_string(hide_password=False)
    command.downgrade(db.alembic_config(url), "0015")
    db.upgrade(url)
    assert [a["build"] for a in client.get("/api/v1/alarms").json()] == ["b-bug"]
    # b-fine's draft accepted everything: it cannot show a bug.
    assert client.get("/api/v1/alarms/counts", params={"build": "b-fine"}).json()["cannot_show"] == 1


def test_two_results_stored_at_once_are_judged_one_after_the_other(client: TestClient, dataset: Path) -> None:
    # Each transaction judges the build from what it reads: without the build's lock the second, begun before the
    # first committed, would store a judgement that never saw the first's result (here: no pair, no alarm).
    worker = register_worker(client, builds=["b-race"])
    body = sweep_body(dataset, build="b-race", repeats=1, graph_modes=["NONE", "PIECEWISE"],
                      speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    submit(client, body).raise_for_status()
    held = {claim(client, worker)["spec"]["graph_mode"]: None for _ in range(2)}
    sessions = client.app.state.sessionmaker
    first = sessions()
    jobs = {job.graph_mode: job for job in first.scalars(select(Job).where(Job.build == "b-race"))}
    assert set(jobs) == set(held)
    results.record(session=first, job=jobs["NONE"], outcome=JobOutcome.model_validate({"result": pair_result(3000)}))

    def second() -> None:
        with db.session_scope(sessions) as session:
            job = session.get(Job, jobs["PIECEWISE"].id)
            results.record(session=session, job=job, outcome=JobOutcome.model_validate({"result": pair_result(2400)}))

    racing = threading.Thread(target=second)
    racing.start()
    time.sleep(1.0)
    assert racing.is_alive()  # waiting for the first to commit
    first.commit()
    first.close()
    racing.join(timeout=30)
    assert not racing.is_alive()
    assert client.get("/api/v1/alarms/counts", params={"build": "b-race"}).json()["alarmed"] == 1


def test_reading_counts_alone_gives_the_alarms_and_the_counts_of_reading_every_check(client: TestClient, dataset: Path) -> None:
    # The index and the API's list count the stored checks in the database instead of reading 4,050 of them.
    graphed_pair(client, dataset, "b-bug", {"NONE": 3000, "PIECEWISE": 2400})
    graphed_pair(client, dataset, "b-fine", {"NONE": 6000, "PIECEWISE": 6000})
    graphed_pair(client, dataset, "b-middle", {"NONE": 3000, "PIECEWISE": 3000})
    graphed_pair(client, dataset, "b-near", {"NONE": 6000, "PIECEWISE": 5950})
    with db.session_scope(client.app.state.sessionmaker) as session:
        for scope in (CellScope(), CellScope(build="b-fine"), CellScope(builds=("b-bug", "b-middle")), CellScope(build="b-near"),
                      CellScope(method="dflash")):
            every, counted = (alarms.read(session=session, scope=scope, checks=checks) for checks in (True, False))
            assert counted.checks == [] and counted.alarms == every.alarms
            assert {o: counted.count(o) for o in CheckOutcome} == {o: every.count(o) for o in CheckOutcome}
            assert {r: counted.count_reason(r) for r in CheckReason} == {r: every.count_reason(r) for r in CheckReason}
            assert (counted.looked_at, counted.judged) == (every.looked_at, every.judged)
        every = alarms.read(session=session, scope=CellScope())
        assert (every.count("alarm"), every.count("cannot_show"), every.count("within"), every.looked_at) == (1, 1, 2, 4)
        assert (every.count_reason("within_interval"), every.count_reason("below_min_effect")) == (1, 1)
        # A sweep's checks are picked by the sweeps each read: read, whatever is asked.
        assert alarms.read(session=session, scope=CellScope(sweep_id=1), checks=False).checks


def test_each_stored_check_says_through_the_api_what_decided_it_with_its_numbers(client: TestClient, dataset: Path) -> None:
    """The three pairs of tests/alarms/test_reasons.py, run and stored: what the stored judgement keeps of each."""
    graphed_pair(client, dataset, "b-bug", {"NONE": 3000, "PIECEWISE": 2400})
    graphed_pair(client, dataset, "b-near", {"NONE": 6000, "PIECEWISE": 5950})
    graphed_pair(client, dataset, "b-held", {"NONE": 3000, "PIECEWISE": 3010})
    checks = {c["build"]: c for c in client.get("/api/v1/alarms/checks").json()}
    decided = {b: (c["outcome"], c["reason"], c["kind"], c["min_effect"]) for b, c in checks.items()}
    assert decided == {"b-bug": ("alarm", "raised", "acceptance", 0.02),
                       "b-near": ("within", "below_min_effect", "acceptance", 0.02),
                       "b-held": ("within", "within_interval", "acceptance", 0.02)}
    near = checks["b-near"]
    assert (near["difference"], near["difference_low"], near["difference_high"]) == pytest.approx(
        (-0.008333, -0.010969, -0.006227), abs=1e-6)
    assert near["sentence"].endswith("below the minimum effect (the interval excludes 0, the difference is smaller): "
                                     "acceptance -0.8 points [-1.1, -0.6] against its eager sibling, minimum effect 2 points")
    within = client.get("/api/v1/alarms/checks", params={"outcome": "within"}).json()
    assert sorted(c["build"] for c in within) == ["b-held", "b-near"]
    counts = client.get("/api/v1/alarms/counts").json()
    assert (counts["alarmed"], counts["within"]) == (1, 2)
    assert counts["within_by_reason"] == {"within_interval": 1, "below_min_effect": 1, "unknown": 0}
    # Judged anew at half a point: the one below 2 points is raised, the one within stays within.
    anew = {c["build"]: c["reason"] for c in client.get("/api/v1/alarms/checks", params={"min_effect": 0.005}).json()}
    assert anew == {"b-bug": "raised", "b-near": "raised", "b-held": "within_interval"}
