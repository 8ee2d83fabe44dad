"""Paired sweeps over REST, on SQLite and PostgreSQL: ``paired_with`` and its refusals, the pairs shown on every job,
``POST /api/v1/sweeps/{id}/more`` and its refusals, and the device time a sweep took."""

from datetime import timedelta

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.models import Job, utcnow
from app.sweeps import pairing
from tests.conftest import AUTH
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body
from tests.statements import reads, recorded

BASE, HEAD = "vllm-test", "vllm-pr"


@pytest.fixture
def worker(client):
    return register_worker(client, builds=(BASE, HEAD))


@pytest.fixture
def pair(client, dataset, worker) -> tuple[dict, dict]:
    """A base sweep (2 cells x 2 repeats) and a head sweep paired with it."""
    base = submit(client, sweep_body(dataset, build=BASE)).json()
    head = submit(client, sweep_body(dataset, build=HEAD, commit="abc", tags=["pr"], paired_with=base["id"]))
    assert head.status_code == 201, head.text
    return base, head.json()


def _refusal(response, status: int = 422) -> dict:
    assert response.status_code == status, response.text
    return response.json()["detail"][0] if status == 422 else {"msg": response.json()["detail"]}


def test_each_head_job_pairs_with_the_base_job_of_its_cell_and_repeat_the_order_alternating(client, pair) -> None:
    base, head = pair
    assert (base["paired_with"], head["paired_with"]) == (None, base["id"])  # the base's answer came before the head
    base = client.get(f"/api/v1/sweeps/{base['id']}").json()
    assert base["paired_with"] == head["id"] and base["warnings"] == head["warnings"] == []
    halves = {(j["cell_index"], j["repeat"]): j for j in base["jobs"]}
    for job in head["jobs"]:
        partner = halves[(job["cell_index"], job["repeat"])]
        assert job["pair_id"] == partner["pair_id"] and len(job["pair_id"]) == 32
        assert (partner["pair_order"], job["pair_order"]) == ((0, 1) if job["repeat"] % 2 == 0 else (1, 0))
    listed = client.get("/api/v1/jobs", params={"sweep_id": head["id"]}).json()
    assert [(j["pair_id"], j["pair_order"]) for j in listed] == [(j["pair_id"], j["pair_order"]) for j in head["jobs"]]
    assert len({j["pair_id"] for j in listed}) == 4


@pytest.mark.parametrize(("change", "said"), [
    ({"paired_with": 999}, "sweep 999 does not exist"),
    ({"repeats": 3}, "runs another matrix: repeats differ"),
    ({"graph_modes": ["NONE"], "workload": {"num_prompts": 5}}, "runs another matrix: workload differ"),
    ({"paired_with": 0}, "greater than or equal to 1"),
])
def test_a_pairing_that_cannot_hold_is_422_naming_paired_with(client, dataset, worker, change, said) -> None:
    base = submit(client, sweep_body(dataset, build=BASE)).json()
    body = sweep_body(dataset, build=HEAD, paired_with=base["id"])
    for key, value in change.items():
        body[key] = body[key] | value if isinstance(value, dict) else value
    detail = _refusal(submit(client, body))
    assert detail["loc"] == ["body", "paired_with"] and said in detail["msg"]
    assert len(client.get("/api/v1/sweeps").json()) == 1  # nothing written


def test_a_finished_or_cancelled_or_already_paired_base_is_refused(client, dataset, worker) -> None:
    done = submit(client, sweep_body(dataset, build=BASE, repeats=1)).json()
    for _ in range(2):
        job = claim(client, worker)
        assert complete(client, job["job_id"], worker, {"result": cell_result()}).status_code == 200
    finished = _refusal(submit(client, sweep_body(dataset, build=HEAD, repeats=1, paired_with=done["id"])))
    assert finished["loc"] == ["body", "paired_with"] and "is finished with no job queued" in finished["msg"]
    cancelled = submit(client, sweep_body(dataset, build=BASE, name="gone")).json()
    client.post(f"/api/v1/sweeps/{cancelled['id']}/cancel", headers=AUTH)
    assert "is cancelled" in _refusal(submit(client, sweep_body(dataset, build=HEAD, paired_with=cancelled["id"])))["msg"]
    base = submit(client, sweep_body(dataset, build=BASE, name="base")).json()
    head = submit(client, sweep_body(dataset, build=HEAD, paired_with=base["id"])).json()
    third = _refusal(submit(client, sweep_body(dataset, build=HEAD, name="again", paired_with=base["id"])))
    assert third["loc"] == ["body", "paired_with"] and f"already paired with sweep {head['id']}" in third["msg"]


def test_more_adds_paired_jobs_to_both_sweeps_at_the_next_repeats_and_they_run_again(client, worker, pair) -> None:
    base, head = pair
    for _ in range(8):
        job = claim(client, worker)
        assert complete(client, job["job_id"], worker, {"result": cell_result()}).status_code == 200
    assert client.get(f"/api/v1/sweeps/{head['id']}").json()["state"] == "finished"
    more = client.post(f"/api/v1/sweeps/{head['id']}/more", json={"cells": [{"cell_index": 1, "pairs": 3}]}, headers=AUTH)
    assert more.status_code == 200, more.text
    assert more.json()["state"] == "running" and more.json()["counts"] == {"succeeded": 4, "queued": 3}
    added = {name: [(j["cell_index"], j["repeat"], j["pair_id"], j["pair_order"])
                    for j in client.get(f"/api/v1/sweeps/{side['id']}").json()["jobs"] if j["state"] == "queued"]
             for name, side in (("base", base), ("head", head))}
    assert [a[:2] for a in added["base"]] == [a[:2] for a in added["head"]] == [(1, 2), (1, 3), (1, 4)]
    assert [a[2] for a in added["base"]] == [a[2] for a in added["head"]]
    assert [a[3] for a in added["base"]] == [0, 1, 0] and [a[3] for a in added["head"]] == [1, 0, 1]
    ran = []
    while (claimed := client.post(f"/api/v1/workers/{worker.id}/claim", headers=worker.headers)).status_code == 200:
        ran.append((claimed.json()["spec"]["build"], claimed.json()["job_id"]))
        complete(client, claimed.json()["job_id"], worker, {"result": cell_result()})
    repeats = {j["job_id"]: j["repeat"] for side in (base, head) for j in client.get(f"/api/v1/sweeps/{side['id']}").json()["jobs"]}
    pairs = sorted((repeats[first[1]], first[0], second[0]) for first, second in zip(ran[::2], ran[1::2], strict=True))
    assert pairs == [(2, BASE, HEAD), (3, HEAD, BASE), (4, BASE, HEAD)]


def test_more_refuses_what_it_cannot_add_naming_the_field(client, make_client, dataset, worker, pair) -> None:
    base, head = pair
    url = f"/api/v1/sweeps/{head['id']}/more"
    missing = _refusal(client.post(url, json={"cells": [{"cell_index": 2, "pairs": 1}]}, headers=AUTH))
    assert missing["loc"] == ["body", "cells", 0, "cell_index"] and "has cells 0 to 1, not cell 2" in missing["msg"]
    twice = _refusal(client.post(url, json={"cells": [{"cell_index": 0, "pairs": 1}, {"cell_index": 0, "pairs": 2}]}, headers=AUTH))
    assert twice["loc"] == ["body", "cells", 1, "cell_index"] and "listed twice" in twice["msg"]
    assert _refusal(client.post(url, json={"cells": [{"cell_index": 0, "pairs": 0}]}, headers=AUTH))["loc"] == [
        "body", "cells", 0, "pairs"]
    assert _refusal(client.post(url, json={"cells": []}, headers=AUTH))["loc"] == ["body", "cells"]
    limited = make_client(max_jobs=6)
    over = _refusal(limited.post(url, json={"cells": [{"cell_index": 0, "pairs": 3}]}, headers=AUTH))
    assert over["loc"] == ["body", "cells"] and "would have 7 jobs, over the limit of 6" in over["msg"]
    alone = submit(client, sweep_body(dataset, build=BASE, name="alone")).json()
    assert "is not paired" in _refusal(client.post(f"/api/v1/sweeps/{alone['id']}/more", json={"cells": [
        {"cell_index": 0, "pairs": 1}]}, headers=AUTH), 409)["msg"]
    token = client.post("/api/v1/tokens", json={"name": "other", "scopes": ["submit"]}, headers=AUTH).json()["secret"]
    assert client.post(url, json={"cells": [{"cell_index": 0, "pairs": 1}]},
                       headers={"Authorization": f"Bearer {token}"}).status_code == 403
    assert client.post(url, json={"cells": [{"cell_index": 0, "pairs": 1}]}).status_code == 401
    client.post(f"/api/v1/sweeps/{base['id']}/cancel", headers=AUTH)
    assert f"sweep {base['id']} is cancelled" in _refusal(client.post(url, json={"cells": [
        {"cell_index": 0, "pairs": 1}]}, headers=AUTH), 409)["msg"]
    assert client.post("/api/v1/sweeps/999/more", json={"cells": [{"cell_index": 0, "pairs": 1}]}, headers=AUTH).status_code == 404
    with client.app.state.sessionmaker() as session:
        assert session.scalar(select(Job.id).where(Job.repeat > 1)) is None  # nothing was added


def test_gpu_seconds_sum_each_ended_job_times_its_gpus_a_cpu_cell_counting_one(client, dataset) -> None:
    register_worker(client, gpu_kinds=["H200"], builds=(BASE,))
    sweep = submit(client, sweep_body(dataset, build=BASE, gpu_kinds=["H200"], backends=["FLASH_ATTN"],
                                      engine_args={"tensor_parallel_size": 2})).json()
    cpu = submit(client, sweep_body(dataset, build=BASE, name="cpu")).json()
    start = utcnow()
    with client.app.state.sessionmaker.begin() as session:
        jobs = session.scalars(select(Job).order_by(Job.id)).all()
        for job, seconds in zip(jobs, (90, 30, None, 45, 10, 20, None, None), strict=True):
            job.started_at = start
            job.finished_at = start + timedelta(seconds=seconds) if seconds is not None else None
    # TP-2: (90 + 30 + 45) x 2 GPUs, the running job not counted; CPU: 10 + 20, one device each.
    timed = {side["id"]: client.get(f"/api/v1/sweeps/{side['id']}").json() for side in (sweep, cpu)}
    assert (timed[sweep["id"]]["gpu_seconds"], timed[sweep["id"]]["timed_jobs"]) == (330.0, 3)
    assert (timed[cpu["id"]]["gpu_seconds"], timed[cpu["id"]]["timed_jobs"]) == (30.0, 2)


def test_a_pair_no_live_worker_can_run_says_so(client, dataset) -> None:
    register_worker(client, builds=(BASE,))
    register_worker(client, builds=(HEAD,))
    base = submit(client, sweep_body(dataset, build=BASE)).json()
    head = submit(client, sweep_body(dataset, build=HEAD, paired_with=base["id"])).json()
    assert head["warnings"] == [f"no live worker serves GPU kind cpu with build {HEAD} and {BASE} (paired runs need "
                                "both on one worker): 4 job(s) wait until one registers"]


def test_a_sweeps_partner_is_found_by_index_where_sqlites_statistics_count_unpaired_jobs_as_one_key(client, pair) -> None:
    # At 100k mostly unpaired jobs, ANALYZE records ix_jobs_pair as 108000 rows a key (every NULL one key), and a join
    # of the jobs with themselves on pair_id scanned all jobs once per job of the sweep: the sweep page took 10 s.
    base, head = pair
    engine = client.app.state.engine
    sqlite = engine.dialect.name == "sqlite"
    if sqlite:
        with engine.begin() as conn:
            conn.execute(text("ANALYZE"))
            conn.execute(text("DELETE FROM sqlite_stat1 WHERE tbl = 'jobs'"))
            conn.execute(text("INSERT INTO sqlite_stat1 VALUES ('jobs', 'ix_jobs_pair', '108000 108000'), "
                              "('jobs', 'ix_jobs_sweep_id', '108000 432')"))
        engine.dispose()  # new connections read the statistics
    with recorded(engine) as sent, Session(engine) as session:
        assert pairing.partner(session=session, sweep_id=head["id"]) == base["id"]
        assert pairing.partner(session=session, sweep_id=base["id"]) == head["id"]
    statements = reads(sent)
    if sqlite:
        with engine.connect() as conn:
            plans = [[row[-1] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params).all()]
                     for sql, params in statements]
        # A scan inside another loop is the one per job of the sweep; a statement may scan once.
        assert plans and not [plan for plan in plans if any(step.startswith("SCAN") for step in plan[1:])], plans
