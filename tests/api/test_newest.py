"""Every list the API and the services give newest first orders by one rule (``app.newest``): the latest time the thing
happened, the later stored first among equal times. An import keeps the times its runs had, so each case here stores
something whose id says "newest" while its time says otherwise, as an import of older runs does, and one tie."""

from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from app.cells import service as cells
from app.models import Bisection, Crash, CrashSignature, Job, Result, Sweep, utcnow
from tests.conftest import AUTH
from tests.crashes.test_api import RANGE, SHAPE, exception_log
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body, upload_log

NOON = utcnow().replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=1)
HOUR = timedelta(hours=1)


def stored(client: TestClient, *statements) -> None:
    """Write what an import of runs made elsewhere stores (their own times), straight into the database."""
    with client.app.state.sessionmaker.begin() as session:
        for statement in statements:
            session.execute(statement)


def ran_at(client: TestClient, job_ids: list[int], when) -> None:
    """Jobs that ended at ``when``: their end, their result's time and their crash's, as ``app.results.service.record``
    stores one time for all three."""
    stored(client, update(Job).where(Job.id.in_(job_ids)).values(finished_at=when),
           update(Result).where(Result.job_id.in_(job_ids)).values(created_at=when),
           update(Crash).where(Crash.job_id.in_(job_ids)).values(created_at=when))


def three_nightlies(client: TestClient, dataset) -> list[int]:
    """Three sweeps of one name, of builds b1, b2 and b3, stored in turn: the second imported from runs an hour before the
    first was submitted, the third submitted at the first's very time; their ids in the order stored."""
    register_worker(client, builds=["b1", "b2", "b3"])
    ids = [submit(client, sweep_body(dataset, name="nightly", build=f"b{i}", repeats=1)).json()["id"] for i in (1, 2, 3)]
    stored(client, update(Sweep).where(Sweep.id.in_([ids[0], ids[2]])).values(created_at=NOON),
           update(Sweep).where(Sweep.id == ids[1]).values(created_at=NOON - HOUR))
    return ids


def test_sweeps_are_newest_first_by_when_submitted_an_import_by_when_it_ran(client: TestClient, dataset) -> None:
    first, imported, tied = three_nightlies(client, dataset)
    assert [s["id"] for s in client.get("/api/v1/sweeps").json()] == [tied, first, imported]
    assert [s["id"] for s in client.get("/api/v1/sweeps", params={"limit": 1, "offset": 1}).json()] == [first]
    with client.app.state.sessionmaker() as session:
        # The builds pages read unasked: of the two newest sweeps, not of the two stored last.
        assert cells.recent_builds(session=session, sweeps=2) == ("b1", "b3")


def crashes_stored_out_of_order(client: TestClient, dataset) -> dict[str, list[int]]:
    """Three crash groups: RANGE (jobs r1, r2, r3, where r2 ran first and r3 last), SHAPE (one crash, run hours before
    every other) and a crash reported without its log (signed by its exit), each stored after the one before; the jobs
    by group."""
    worker = register_worker(client)
    submit(client, sweep_body(dataset, repeats=3))
    jobs: dict[str, list[int]] = {}
    for group, line in (("range", RANGE), ("range", RANGE), ("range", RANGE), ("shape", SHAPE), ("bare", None)):
        job = claim(client, worker)["job_id"]
        if line is not None:
            assert upload_log(client, job, worker, exception_log(line, job * 7)).status_code == 204
        assert complete(client, job, worker, {"exit_code": 1, "duration_s": 3}).status_code == 200
        jobs.setdefault(group, []).append(job)
    (r1, r2, r3), [shape], [bare] = jobs["range"], jobs["shape"], jobs["bare"]
    for job, when in ((r1, NOON - HOUR), (r2, NOON - 2 * HOUR), (r3, NOON), (shape, NOON - 3 * HOUR), (bare, NOON - HOUR / 2)):
        ran_at(client, [job], when)
    # Each group last seen at its newest crash, as ``app.crashes.service.record`` keeps it.
    newest = select(func.max(Crash.created_at)).where(Crash.signature_id == CrashSignature.id).scalar_subquery()
    stored(client, update(CrashSignature).values(last_seen=newest))
    return jobs


def test_crash_groups_and_their_crashes_are_newest_first_by_when_they_ran(client: TestClient, dataset) -> None:
    jobs = crashes_stored_out_of_order(client, dataset)
    listed = client.get("/api/v1/crashes").json()
    # Stored range, shape, bare; last seen range (noon), bare (half an hour before), shape (three hours before).
    assert [g["count"] for g in listed] == [3, 1, 1] and "out of range" in listed[0]["title"]
    assert "size mismatch" in listed[2]["title"]
    r1, r2, r3 = jobs["range"]
    assert client.get(f"/api/v1/crashes/{listed[0]['signature']}").json()["job_ids"] == [r3, r1, r2]


def test_calibration_misses_are_newest_first_by_when_their_cell_ended(client: TestClient, dataset) -> None:
    worker = register_worker(client, gpu_kinds=["H200"])
    synthetic = {"method": "draft_model", "model": "/m", "num_speculative_tokens": 3, "rejection_sample_method": "synthetic",
                 "synthetic_acceptance_rates": [0.99, 0.5, 0.25]}
    submit(client, sweep_body(dataset, gpu_kinds=["H200"], backends=["FLASH_ATTN"], repeats=3, speculative=[synthetic]))
    jobs = [claim(client, worker)["job_id"] for _ in range(3)]
    for job in jobs:  # position 1 accepts 15 of 20 drafts, [0.53, 0.89]: a miss of the 0.99 asked
        assert complete(client, job, worker, {"result": cell_result(), "exit_code": 0}).status_code == 200
    first, second, third = jobs
    ran_at(client, [first], NOON)
    ran_at(client, [second, third], NOON - HOUR)
    found = client.get("/api/v1/calibration-misses").json()
    assert found["count"] == 3 and [m["job_id"] for m in found["misses"]] == [first, third, second]


def test_bisections_are_newest_first_by_when_they_started(client: TestClient) -> None:
    series = ["s0", "s1", "s2"]
    register_worker(client, builds=series)
    ids = [client.post("/api/v1/bisections", json={"name": name, "series": series, "good": "s0", "bad": "s2"},
                       headers=AUTH).json()["id"] for name in ("a", "b", "c")]
    stored(client, update(Bisection).where(Bisection.id == ids[0]).values(created_at=NOON),
           update(Bisection).where(Bisection.id.in_(ids[1:])).values(created_at=NOON - HOUR))
    assert [b["id"] for b in client.get("/api/v1/bisections").json()] == [ids[0], ids[2], ids[1]]


def test_the_history_shown_unasked_is_of_the_result_that_ended_last(client: TestClient, dataset) -> None:
    """Build by build (``latest_cell``), and between two builds' results that ended at one instant, the later stored."""
    worker = register_worker(client, builds=["b1", "b2", "b3"])
    ends = {}
    for build, method, when in (("b1", "ngram", NOON), ("b2", "draft_model", NOON - HOUR), ("b3", "eagle", NOON)):
        speculative = [{"method": method, "model": "/m", "num_speculative_tokens": 3} if method != "ngram"
                       else {"method": "ngram", "num_speculative_tokens": 3}]
        submit(client, sweep_body(dataset, build=build, repeats=1, speculative=speculative))
        job = claim(client, worker)["job_id"]
        assert complete(client, job, worker, {"result": cell_result(), "exit_code": 0}).status_code == 200
        ends[method] = (job, when)
    for job, when in ends.values():
        ran_at(client, [job], when)
    assert latest_method(client) == "eagle"
    ran_at(client, [ends["eagle"][0]], NOON - 2 * HOUR)
    assert latest_method(client) == "ngram"


def latest_method(client: TestClient) -> str | None:
    with client.app.state.sessionmaker() as session:
        return (cells.latest_cell(session=session) or {}).get("method")
