"""Crash groups over HTTP: titles, and the merges and splits admins make, on SQLite and PostgreSQL."""

import pytest
from sqlalchemy import select

from app.models import CrashOverride
from tests.cells.test_crashed_in import died_four_ways
from tests.conftest import AUTH
from tests.factories import claim, complete, register_worker, submit, sweep_body, upload_log

VENV = "/venv/lib/python3.11/site-packages"


def exception_log(line: str, pid: int) -> str:
    return f"""\
(EngineCore_DP0 pid={pid}) ERROR 11-30 00:01:02 [core.py:1510] Traceback (most recent call last):
(EngineCore_DP0 pid={pid}) ERROR 11-30 00:01:02 [core.py:1510]   File "{VENV}/vllm/v1/spec_decode/dflash.py", line 212, in load_model
(EngineCore_DP0 pid={pid}) ERROR 11-30 00:01:02 [core.py:1510] {line}
"""


RANGE = "ValueError: target_layer_ids [9] out of range for a 2-layer target"
SHAPE = "RuntimeError: size mismatch, got input (10), mat (10x128), vec (0)"


@pytest.fixture
def crash(client, dataset):
    """A function that makes one more crashed job with a log of ``line``; answers its job id."""
    worker = register_worker(client)
    submit(client, sweep_body(dataset, repeats=4))

    def make(line: str) -> int:
        job = claim(client, worker)
        assert upload_log(client, job["job_id"], worker, exception_log(line, job["job_id"] * 7)).status_code == 204
        assert complete(client, job["job_id"], worker, {"exit_code": 1, "duration_s": 3}).status_code == 200
        return job["job_id"]

    make.worker = worker
    return make


def groups(client) -> dict[str, dict]:
    return {group["title"]: group for group in client.get("/api/v1/crashes").json()}


def test_a_group_shows_its_title(client, crash):
    crash(RANGE)
    [group] = client.get("/api/v1/crashes").json()
    assert group["title"] == "ValueError: target_layer_ids [<n>] out of range for a <n>-layer target in dflash.load_model"
    assert client.get(f"/api/v1/crashes/{group['signature']}").json()["title"] == group["title"]


def test_merging_and_splitting_need_an_admin(client, crash):
    crash(RANGE)
    [group] = client.get("/api/v1/crashes").json()
    body = {"into": "f" * 64, "reason": "one cause"}
    assert client.post(f"/api/v1/crashes/{group['signature']}/merge", json=body).status_code == 401
    assert client.post(f"/api/v1/crashes/{group['signature']}/merge", json=body, headers=crash.worker.headers).status_code == 403
    split = {"job_ids": [1], "reason": "two causes"}
    assert client.post(f"/api/v1/crashes/{group['signature']}/split", json=split, headers=crash.worker.headers).status_code == 403


def test_a_merge_moves_every_crash_and_later_crashes_follow(client, crash, migrated_sessions):
    first, second, other = crash(RANGE), crash(RANGE), crash(SHAPE)
    by_title = groups(client)
    source = next(g for t, g in by_title.items() if t.startswith("ValueError"))
    target = next(g for t, g in by_title.items() if t.startswith("RuntimeError"))
    answer = client.post(
        f"/api/v1/crashes/{source['signature']}/merge", json={"into": target["signature"], "reason": "one cause"}, headers=AUTH
    )
    assert answer.status_code == 200 and answer.json()["count"] == 3
    # A link written before the merge (a pull request's comment, a page) leads to the group it went into.
    for path in (f"/api/v1/crashes/{source['signature']}", f"/crashes/{source['signature']}"):
        moved = client.get(path, follow_redirects=False)
        assert moved.status_code == 308 and moved.headers["location"].endswith(path.replace(source["signature"], target["signature"]))
        assert client.get(path).status_code == 200
    assert client.get("/api/v1/crashes/" + "0" * 64).status_code == 404
    later = crash(RANGE)
    detail = client.get(f"/api/v1/crashes/{target['signature']}").json()
    assert sorted(detail["job_ids"]) == sorted([first, second, other, later])
    with migrated_sessions() as session:
        [override] = session.scalars(select(CrashOverride))
        assert (override.action, override.reason, override.created_by) == ("merge", "one cause", "DRAFTBENCH_TOKEN (bootstrap)")
        assert sorted(override.job_ids) == sorted([first, second, other])


def test_a_group_merged_into_itself_or_an_unknown_one_is_refused(client, crash):
    crash(RANGE)
    [group] = client.get("/api/v1/crashes").json()
    url = f"/api/v1/crashes/{group['signature']}/merge"
    assert client.post(url, json={"into": group["signature"], "reason": "r"}, headers=AUTH).status_code == 409
    assert client.post(url, json={"into": "0" * 64, "reason": "r"}, headers=AUTH).status_code == 404
    assert client.post(url, json={"into": "short", "reason": "r"}, headers=AUTH).status_code == 422
    assert client.post(url, json={"into": "0" * 64}, headers=AUTH).status_code == 422


def test_a_split_moves_the_named_jobs_to_a_group_of_their_own(client, crash):
    first, second, third = crash(RANGE), crash(RANGE), crash(RANGE)
    [group] = client.get("/api/v1/crashes").json()
    url = f"/api/v1/crashes/{group['signature']}/split"
    answer = client.post(url, json={"job_ids": [second], "reason": "another cause"}, headers=AUTH)
    assert answer.status_code == 200, answer.text
    new = answer.json()
    assert new["count"] == 1 and new["title"] == f"{group['title']} (split)" and new["signature"] != group["signature"]
    assert sorted(client.get(f"/api/v1/crashes/{group['signature']}").json()["job_ids"]) == sorted([first, third])
    assert client.get(f"/api/v1/crashes/{new['signature']}").json()["job_ids"] == [second]


def test_a_split_of_jobs_outside_the_group_names_job_ids(client, crash):
    crash(RANGE)
    [group] = client.get("/api/v1/crashes").json()
    answer = client.post(f"/api/v1/crashes/{group['signature']}/split", json={"job_ids": [999], "reason": "r"}, headers=AUTH)
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["body", "job_ids"]
    assert client.post(f"/api/v1/crashes/{group['signature']}/split", json={"job_ids": [], "reason": "r"}, headers=AUTH).status_code == 422


def test_a_groups_cells_link_only_the_logs_that_were_kept(client, dataset):
    """A crash reported without its log (the service refused it) is in its group with ``log`` null, not a 404 link."""
    _, (crashed, bare, timed_out, _) = died_four_ways(client, dataset)
    cells = {cell["job_id"]: cell for group in client.get("/api/v1/crashes").json()
             for cell in client.get(f"/api/v1/crashes/{group['signature']}").json()["cells"]}
    assert set(cells) == {crashed, bare, timed_out}
    assert cells[bare]["log"] is None
    for job in (crashed, timed_out):
        assert cells[job]["log"] == f"/api/v1/jobs/{job}/log" and client.get(cells[job]["log"]).status_code == 200
