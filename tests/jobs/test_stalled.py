"""Dead workers are noticed by the service itself, on its own schedule: no claim needs to happen."""

import time
from datetime import timedelta

import httpx
import pytest

from app.config import Settings
from app.enums import JobState
from app.jobs import retry
from app.models import utcnow
from app.workers import liveness
from tests.conftest import AUTH, DATASET, TOKEN
from tests.factories import sweep_body
from tests.live import serve

LEASE_S = 2.0
CHECK_S = 0.5


def test_every_worker_killed_their_jobs_are_queued_again_or_failed_without_any_claim(db_url: str) -> None:
    settings = Settings(database_url=db_url, token=TOKEN, lease_seconds=LEASE_S, stall_check_seconds=CHECK_S)
    with serve(settings) as base, httpx.Client(base_url=base, timeout=30) as http:
        workers = []
        for name in ("a", "b"):
            body = {"name": name, "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "vllm-test"}]}
            registered = http.post("/api/v1/workers", json=body, headers=AUTH).json()
            workers.append((registered["id"], {"Authorization": f"Bearer {registered['credential']}"}))
        # Two sweeps: one whose jobs may try again, one whose single attempt is used up by this death.
        retried = http.post("/api/v1/sweeps", json=sweep_body(DATASET, name="retried", repeats=1), headers=AUTH).json()
        claimed = [http.post(f"/api/v1/workers/{wid}/claim", headers=auth).json()["job_id"] for wid, auth in workers]
        killed_at = time.monotonic()
        # Both workers are now gone: no heartbeat, no claim, nothing. Only the service's own check runs.
        deadline = killed_at + LEASE_S + CHECK_S + 3.0
        while True:
            jobs = {j["id"]: j for j in http.get("/api/v1/jobs", params={"sweep_id": retried["id"]}).json()}
            if all(jobs[j]["state"] == JobState.QUEUED for j in claimed):
                break
            assert time.monotonic() < deadline, [jobs[j]["state"] for j in claimed]
            time.sleep(0.1)
        waited = time.monotonic() - killed_at
        assert LEASE_S - 0.5 < waited < LEASE_S + CHECK_S + 3.0
        assert all(jobs[j]["attempts"] == 1 and jobs[j]["worker_id"] is None for j in claimed)
        assert [w["alive"] for w in http.get("/api/v1/workers").json()] == [False, False]
        # Nobody claimed: the claim histogram counted only the two claims above.
        metrics = http.get("/metrics").text
        assert 'draftbench_claim_seconds_count{outcome="job"} 2.0' in metrics


def _one_claimed_job(http: httpx.Client) -> tuple[dict, dict[str, str], int]:
    """A registered worker, its credential headers, and the job it claimed from a one-job sweep."""
    body = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "vllm-test"}]}
    registered = http.post("/api/v1/workers", json=body, headers=AUTH).json()
    http.post("/api/v1/sweeps", json=sweep_body(DATASET, repeats=1), headers=AUTH)
    auth = {"Authorization": f"Bearer {registered['credential']}"}
    return registered, auth, http.post(f"/api/v1/workers/{registered['id']}/claim", headers=auth).json()["job_id"]


def test_a_job_whose_worker_died_on_its_last_attempt_fails(db_url: str) -> None:
    settings = Settings(database_url=db_url, token=TOKEN, lease_seconds=LEASE_S, stall_check_seconds=CHECK_S, max_attempts=1)
    with serve(settings) as base, httpx.Client(base_url=base, timeout=30) as http:
        _, _, job_id = _one_claimed_job(http)
        deadline = time.monotonic() + LEASE_S + CHECK_S + 3.0
        while (job := http.get(f"/api/v1/jobs/{job_id}").json())["state"] == JobState.RUNNING:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert job["state"] == JobState.FAILED and "died on attempt 1 of 1" in job["error"]


def test_a_worker_that_keeps_beating_keeps_its_job_however_long_the_cell_runs(db_url: str) -> None:
    settings = Settings(database_url=db_url, token=TOKEN, lease_seconds=LEASE_S, stall_check_seconds=CHECK_S)
    with serve(settings) as base, httpx.Client(base_url=base, timeout=30) as http:
        registered, auth, job_id = _one_claimed_job(http)
        until = time.monotonic() + 3 * LEASE_S
        while time.monotonic() < until:
            beat = http.post(f"/api/v1/workers/{registered['id']}/heartbeat", json={"job_ids": [job_id]}, headers=auth)
            assert beat.json() == {"stop": []}
            time.sleep(LEASE_S / 4)
        assert http.get(f"/api/v1/jobs/{job_id}").json()["state"] == JobState.RUNNING


@pytest.mark.parametrize(
    ("attempts", "max_attempts", "state"),
    [(1, 3, JobState.QUEUED), (2, 3, JobState.QUEUED), (3, 3, JobState.FAILED), (4, 3, JobState.FAILED), (1, 1, JobState.FAILED)],
)
def test_retry_policy_requeues_until_the_attempts_are_used(attempts: int, max_attempts: int, state: JobState) -> None:
    decision = retry.after_stall(attempts=attempts, max_attempts=max_attempts, worker_id=7)
    assert decision.state is state
    assert (decision.error is None) == (state is JobState.QUEUED)


def test_one_liveness_rule_a_heartbeat_is_good_for_exactly_the_lease() -> None:
    now = utcnow()
    assert liveness.is_alive(now - timedelta(seconds=29.9), now=now, lease_seconds=30)
    assert not liveness.is_alive(now - timedelta(seconds=30), now=now, lease_seconds=30)
