"""Paired runs in the queue, on SQLite and PostgreSQL: a pair's second half goes to the worker that ran its first,
back to back, the order alternating with the repeat; a worker that cannot run both halves takes neither; a half
whose partner's worker died, or that never ran, is freed; concurrent claimers keep all of it."""

from collections import defaultdict
from datetime import datetime, timedelta

from sqlalchemy import select

from app.enums import JobState
from app.jobs import queue
from app.models import Job, Sweep, Worker, utcnow
from app.sweeps import pairing
from tests.jobs.concurrency import LEASE, claim_concurrently

BASE, HEAD = "main", "pr"


def _sweep(session, build: str, cells: int, repeats: int, priority: int = 0) -> Sweep:
    sweep = Sweep(name=build, build=build, spec={"build": build}, priority=priority)
    sweep.jobs.extend(
        Job(cell_index=c, repeat=r, build=build, gpu_kind="cpu", backend="CPU_ATTN", graph_mode="NONE", method="ngram",
            spec={}, config_hash=f"h{c}", priority=priority)
        for c in range(cells) for r in range(repeats)
    )
    session.add(sweep)
    session.flush()
    return sweep


def _paired(session, cells: int = 1, repeats: int = 1) -> tuple[Sweep, Sweep]:
    base, head = _sweep(session, BASE, cells, repeats), _sweep(session, HEAD, cells, repeats)
    assert pairing.pair(session=session, base=base, head=head) == cells * repeats
    return base, head


def _worker(session, name: str = "w", builds=(BASE, HEAD), heard: datetime | None = None) -> int:
    worker = Worker(name=name, host="h", gpu_kinds=["cpu"], builds=list(builds), last_heartbeat_at=heard or utcnow())
    session.add(worker)
    session.flush()
    return worker.id


def _claim(session, worker_id: int, builds=(BASE, HEAD), now: datetime | None = None) -> Job | None:
    return queue.claim(session=session, worker_id=worker_id, gpu_kinds=["cpu"], builds=list(builds),
                       lease_seconds=LEASE, now=now)


def _done(session, job: Job, state: JobState = JobState.SUCCEEDED) -> None:
    queue.finish(session=session, job=job, state=state)


def test_one_worker_runs_each_pair_back_to_back_the_base_first_on_even_repeats(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        _paired(s, cells=2, repeats=2)
        w = _worker(s)
    ran = []
    with migrated_sessions.begin() as s:
        while (job := _claim(s, w)) is not None:
            ran.append((job.pair_id, job.cell_index, job.repeat, job.build))
            _done(s, job)
    assert len(ran) == 8
    pairs = [ran[i:i + 2] for i in range(0, 8, 2)]
    assert all(first[0] == second[0] for first, second in pairs)  # each pair's halves one after the other
    assert sorted((first[1], first[2], first[3], second[3]) for first, second in pairs) == [
        (0, 0, BASE, HEAD), (0, 1, HEAD, BASE), (1, 0, BASE, HEAD), (1, 1, HEAD, BASE)]


def test_the_second_half_waits_for_the_worker_that_ran_the_first_whatever_the_priority(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        base, head = _paired(s)
        urgent = _sweep(s, BASE, 1, 1, priority=50).jobs[0].id
        first, second = _worker(s, "a"), _worker(s, "b")
    with migrated_sessions.begin() as s:
        assert _claim(s, first).id == urgent
        leader = _claim(s, first)
        assert leader.sweep_id == base.id and leader.pair_order == 0
        assert _claim(s, second) is None  # the head half is the first worker's, even while it runs the base half
        _done(s, leader)
        assert _claim(s, second) is None
        follower = _claim(s, first)
        assert (follower.sweep_id, follower.pair_id) == (head.id, leader.pair_id)


def test_a_worker_holding_one_of_the_builds_takes_neither_half(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        _paired(s)
        alone = _sweep(s, BASE, 1, 1).jobs[0].id
        w = _worker(s, builds=[BASE])
    with migrated_sessions.begin() as s:
        assert _claim(s, w, builds=[BASE]).id == alone
        assert _claim(s, w, builds=[BASE]) is None


def _one_pair_two_workers(sessions, heard: datetime) -> tuple[int, int]:
    with sessions.begin() as s:
        _paired(s)
        return _worker(s, "a", heard=heard), _worker(s, "b", heard=heard)


def test_the_half_of_a_dead_worker_is_freed_for_another_once_its_lease_lapsed(migrated_sessions) -> None:
    start = utcnow()
    first, second = _one_pair_two_workers(migrated_sessions, start)
    with migrated_sessions.begin() as s:
        _done(s, _claim(s, first, now=start))
    late = start + timedelta(seconds=LEASE - 1)
    with migrated_sessions.begin() as s:
        s.get(Worker, second).last_heartbeat_at = late
        assert _claim(s, second, now=late) is None
    dead = start + timedelta(seconds=LEASE + 1)
    with migrated_sessions.begin() as s:
        s.get(Worker, second).last_heartbeat_at = dead
        freed = _claim(s, second, now=dead)
        assert freed is not None and freed.build == HEAD and freed.worker_id == second


def test_a_half_whose_partner_crashed_runs_next_and_one_whose_partner_was_cancelled_is_anyones(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        base, _ = _paired(s, cells=2)
        first, second = _worker(s, "a"), _worker(s, "b")
    with migrated_sessions.begin() as s:
        _done(s, _claim(s, first), JobState.CRASHED)
        assert _claim(s, second).cell_index == 1  # the other pair's first half
        assert _claim(s, first).build == HEAD  # the crashed half's partner, on its worker
    with migrated_sessions.begin() as s:
        assert queue.cancel(session=s, sweep_id=base.id) == 1
        # The running first half was cancelled on the second worker, which is alive: the head half stays its own.
        assert _claim(s, first) is None
        assert _claim(s, second).pair_id == s.scalars(select(Job.pair_id).where(Job.sweep_id == base.id, Job.cell_index == 1)).one()


def test_a_second_half_without_a_partner_is_anyones(migrated_sessions) -> None:
    # An imported head sweep keeps its pairs, its base imported or not: a half with no partner waits on nothing.
    with migrated_sessions.begin() as s:
        [job] = _sweep(s, HEAD, 1, 1).jobs
        job.pair_id, job.pair_order = "f" * 32, 1
        w = _worker(s, builds=[HEAD])
    with migrated_sessions.begin() as s:
        assert _claim(s, w, builds=[HEAD]).pair_id == "f" * 32


def test_a_first_half_requeued_after_its_worker_died_takes_its_partner_along(migrated_sessions) -> None:
    start = utcnow()
    first, second = _one_pair_two_workers(migrated_sessions, start)
    with migrated_sessions.begin() as s:
        _claim(s, first, now=start)
    later = start + timedelta(seconds=LEASE + 1)
    with migrated_sessions.begin() as s:
        assert queue.requeue_stalled(session=s, lease_seconds=LEASE, now=later) == 1
        s.get(Worker, second).last_heartbeat_at = later
        again = _claim(s, second, now=later)
        assert again.build == BASE and again.attempts == 2
        _done(s, again)
        assert _claim(s, second, now=later).build == HEAD


def test_concurrent_claimers_keep_each_pair_on_one_worker_back_to_back(migrated_sessions) -> None:
    with migrated_sessions.begin() as s:
        _paired(s, cells=15, repeats=2)
        _sweep(s, HEAD, 10, 1)  # unpaired jobs beside them
        workers = [_worker(s, f"w{i}") for i in range(6)]
        pair_of = {job.id: job.pair_id for job in s.scalars(select(Job))}
    order: dict[int, list[int]] = defaultdict(list)

    def claim_and_finish(session, worker_id: int) -> int | None:
        job = _claim(session, worker_id)
        if job is None:
            return None
        _done(session, job)
        order[worker_id].append(job.id)
        return job.id

    claimed = claim_concurrently(migrated_sessions, workers, claim_and_finish)
    assert len(claimed) == len(set(claimed)) == 70
    # Each pair's halves went to one worker, one right after the other: nothing ran between them.
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for worker_id, jobs in order.items():
        for position, job_id in enumerate(jobs):
            if pair_of[job_id] is not None:
                where[pair_of[job_id]].append((worker_id, position))
    assert len(where) == 30
    assert all(len(at) == 2 and at[0][0] == at[1][0] and abs(at[0][1] - at[1][1]) == 1 for at in where.values())
    assert len([w for w, jobs in order.items() if jobs]) > 1  # the work spread over the claimers
