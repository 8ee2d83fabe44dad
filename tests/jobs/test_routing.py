"""Which job a claim hands out, on SQLite and PostgreSQL: priority, fairness between sweeps, GPU count."""


from sqlalchemy import select

from app.enums import JobState
from app.jobs import queue
from app.models import Job, Sweep, Worker
from tests.jobs.concurrency import LEASE, claim_concurrently


def _sweep(session, n: int, *, priority: int = 0, gpu_kind: str = "H200", gpus_needed: int = 1) -> list[int]:
    sweep = Sweep(name="r", build="b", spec={"build": "b"}, priority=priority)
    for i in range(n):
        sweep.jobs.append(
            Job(cell_index=i, repeat=0, build="b", gpu_kind=gpu_kind, backend="FLASH_ATTN", graph_mode="NONE",
                method="ngram", spec={}, config_hash="h", priority=priority, gpus_needed=gpus_needed)
        )
    session.add(sweep)
    session.flush()
    return [job.id for job in sweep.jobs]


def _worker(session, name: str = "w", gpu_count: int = 1) -> int:
    worker = Worker(name=name, host="h", gpu_kinds=["H200"], gpu_count=gpu_count, builds=["b"])
    session.add(worker)
    session.flush()
    return worker.id


def _claim(session, worker_id: int, gpu_count: int | None = 1):
    job = queue.claim(session=session, worker_id=worker_id, gpu_kinds=["H200"], builds=["b"],
                      lease_seconds=LEASE, gpu_count=gpu_count)
    return None if job is None else job.id


def test_two_sweeps_of_equal_priority_get_claims_in_turn(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        a = _sweep(s, 4)
        b = _sweep(s, 4)
        w = _worker(s)
    with migrated_sessions.begin() as s:
        order = [_claim(s, w) for _ in range(8)]
    # Many workers, nothing finished yet: the sweep with fewer running jobs goes next.
    assert order == [a[0], b[0], a[1], b[1], a[2], b[2], a[3], b[3]]


def test_one_worker_finishing_each_job_alternates_between_sweeps(migrated_sessions) -> None:
    # Nothing is ever running at claim time here: the sweep served least recently goes next,
    # so a big nightly sweep submitted first does not hold a later one back until it is done.
    with migrated_sessions.begin() as s:
        a = _sweep(s, 3)
        b = _sweep(s, 3)
        w = _worker(s)
    order = []
    for _ in range(6):
        with migrated_sessions.begin() as s:
            job_id = _claim(s, w)
            order.append(job_id)
            queue.finish(session=s, job=s.get(Job, job_id), state=JobState.SUCCEEDED)
    assert order == [a[0], b[0], a[1], b[1], a[2], b[2]]


def test_a_later_high_priority_sweep_is_claimed_first(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        nightly = _sweep(s, 3)
        w = _worker(s)
    with migrated_sessions.begin() as s:
        first = _claim(s, w)
    with migrated_sessions.begin() as s:
        ci = _sweep(s, 2, priority=10)
    with migrated_sessions.begin() as s:
        order = [_claim(s, w) for _ in range(4)]
    assert first == nightly[0]
    assert order == [ci[0], ci[1], nightly[1], nightly[2]]


def test_tensor_parallel_cells_go_only_to_a_worker_with_enough_gpus(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        tp2 = _sweep(s, 2, gpus_needed=2)
        single = _sweep(s, 2, gpus_needed=1)
        one_gpu = _worker(s, "one", gpu_count=1)
        two_gpus = _worker(s, "two", gpu_count=2)
    with migrated_sessions.begin() as s:
        assert _claim(s, one_gpu, gpu_count=1) == single[0]
        # The two-GPU worker takes the cells only it can run before the single-GPU ones.
        assert [_claim(s, two_gpus, gpu_count=2) for _ in range(2)] == tp2
        assert _claim(s, one_gpu, gpu_count=1) == single[1]
        assert _claim(s, one_gpu, gpu_count=1) is None


def test_cpu_cells_need_no_gpu(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        [cpu_job] = _sweep(s, 1, gpu_kind="cpu", gpus_needed=0)
        w = Worker(name="cpu", host="h", gpu_kinds=["cpu"], gpu_count=0, builds=["b"])
        s.add(w)
        s.flush()
        job = queue.claim(session=s, worker_id=w.id, gpu_kinds=["cpu"], builds=["b"], lease_seconds=LEASE, gpu_count=0)
        assert job.id == cpu_job


def test_concurrent_claims_across_sweeps_stay_exclusive(migrated_sessions) -> None:
    # The fairness subqueries must not cost the claim its atomicity (one statement, SKIP LOCKED on PG).
    with migrated_sessions.begin() as s:
        for priority in (0, 0, 5):
            _sweep(s, 12, priority=priority)
        workers = [_worker(s, f"w{i}") for i in range(4)]
    claimed = claim_concurrently(migrated_sessions, workers, _claim)
    assert len(claimed) == 36 and len(set(claimed)) == 36
    with migrated_sessions() as s:
        assert set(s.scalars(select(Job.state))) == {JobState.RUNNING}
