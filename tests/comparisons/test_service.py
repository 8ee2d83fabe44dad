"""The compare table over stored runs: each head cell judged against its own history on other builds."""

import math
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from app.cells.scope import CellScope
from app.comparisons import service as comparisons
from app.models import Job, Result
from tests.factories import cell_result, claim, complete, register_worker, run_cell, submit, sweep_body

BUILDS = [f"b{i}" for i in range(7)]


def test_a_cell_with_a_quiet_history_is_called_on_one_repeat_a_side(client: TestClient, dataset: Path) -> None:
    worker = register_worker(client, builds=BUILDS)
    # Five earlier builds at 100, 101, 99, 100, 101 (one start each: no noise model): mean 100.2,
    # sd sqrt(2.8 / 4) = 0.837, a learned threshold of 5 x 0.837 / 100.2 = 4.2 %.
    for build, level in zip(BUILDS[:5], (100.0, 101.0, 99.0, 100.0, 101.0), strict=True):
        run_cell(client, worker, dataset, build, [level])
    base = run_cell(client, worker, dataset, "b5", [100.0])
    head = run_cell(client, worker, dataset, "b6", [80.0])
    with client.app.state.sessionmaker() as session:
        *_, [change] = comparisons.between(session=session, base=CellScope(sweep_id=base), head=CellScope(sweep_id=head))
        history = comparisons.histories(session=session, head=[change.head], exclude={"b5", "b6"})
    assert list(history.values()) == [[100.0, 101.0, 99.0, 100.0, 101.0]]  # oldest build first, mean of repeats
    assert change.verdict.value == "worse" and change.numbers.throughput.threshold.source == "history"
    assert change.reasons[0].startswith("tokens/s 0.80x (too few repeats for a test; history threshold 4.2%)")


def test_a_noise_model_calls_one_start_a_side(client: TestClient, dataset: Path) -> None:
    worker = register_worker(client, builds=BUILDS)
    # Five earlier builds of two starts each, 99.5 and 100.5 tok/s: five A/A groups, each d = ln(100.5 / 99.5)
    # = 0.0100000 apart, so s^2 = 5 x d^2 / 2 / 5 = d^2 / 2: s = 0.0070711 on 5 df.
    for build in BUILDS[:5]:
        run_cell(client, worker, dataset, build, [99.5, 100.5])
    base = run_cell(client, worker, dataset, "b5", [100.0])
    head = run_cell(client, worker, dataset, "b6", [80.0])
    with client.app.state.sessionmaker() as session:
        *_, [change] = comparisons.between(session=session, base=CellScope(sweep_id=base), head=CellScope(sweep_id=head))
    found = change.numbers.throughput
    # se = 0.0070711 sqrt(2) = 0.01, t_{5, 0.975} = 2.57058: 0.8 exp(+-0.0257058).
    assert change.verdict.value == "worse" and found.rule.value == "noise_model"
    assert (found.ratio.low, found.ratio.high) == pytest.approx((0.8 * math.exp(-0.0257058), 0.8 * math.exp(0.0257058)), rel=1e-4)
    # (2.57058 + 0.91954) x 0.01 = 0.0349012: exp - 1 = 3.55 %.
    assert found.detectable == pytest.approx(0.035517, abs=1e-5)
    assert change.reasons[0] == "tokens/s 0.80x [0.78, 0.82] (noise model, 95 %): could detect 4 % or more; slower"


def test_a_builds_kept_history_moves_when_one_of_its_jobs_succeeds_or_is_removed(client: TestClient, dataset: Path) -> None:
    # Each build's means are kept per process (comparisons._MEANS) until its succeeded jobs' count, newest finish or
    # ids move: a page then reads only the builds that moved.
    worker = register_worker(client, builds=BUILDS)
    run_cell(client, worker, dataset, "b0", [100.0])
    base = run_cell(client, worker, dataset, "b5", [100.0])
    head = run_cell(client, worker, dataset, "b6", [80.0])

    def history() -> list[list[float]]:
        with client.app.state.sessionmaker() as session:
            *_, [change] = comparisons.between(session=session, base=CellScope(sweep_id=base), head=CellScope(sweep_id=head))
            return list(comparisons.histories(session=session, head=[change.head], exclude={"b5", "b6"}).values())

    assert history() == history() == [[100.0]]
    later = run_cell(client, worker, dataset, "b0", [104.0])
    assert history() == [[102.0]]
    with client.app.state.sessionmaker() as session:
        session.execute(update(Job).where(Job.sweep_id == later).values(state="cancelled"))
        session.commit()
    assert history() == [[100.0]]


def test_without_history_one_repeat_a_side_is_not_enough_to_call(client: TestClient, dataset: Path) -> None:
    worker = register_worker(client, builds=BUILDS[:2])
    base = run_cell(client, worker, dataset, "b0", [100.0])
    head = run_cell(client, worker, dataset, "b1", [80.0])
    with client.app.state.sessionmaker() as session:
        *_, [change] = comparisons.between(session=session, base=CellScope(sweep_id=base), head=CellScope(sweep_id=head))
    assert change.verdict.value == "undecided" and "not enough repeats to call" in change.reasons[0]


def test_cells_that_differ_only_in_how_long_they_were_measured_are_compared(client: TestClient, dataset: Path) -> None:
    # Same model, workload and draft; other rounds, window, warm-up, timeout and sweep name: one cell. Other
    # output lengths measure something else: no cell in common.
    worker = register_worker(client, builds=BUILDS[:3])
    ran = []
    for build, name, workload in (("b0", "short", {"rounds": 3, "min_window_s": 1.0, "warmup_prompts": 1}),
                                  ("b1", "long", {"rounds": 5}), ("b2", "other", {"max_tokens": 16})):
        body = sweep_body(dataset, build=build, name=name, repeats=1, timeout_s=600 if build == "b0" else 900,
                          speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
        body["workload"] |= workload
        ran.append(submit(client, body).json()["id"])
        job = claim(client, worker)
        assert complete(client, job["job_id"], worker, {"result": cell_result()}).status_code == 200
    with client.app.state.sessionmaker() as session:
        *_, changes = comparisons.between(session=session, base=CellScope(sweep_id=ran[0]), head=CellScope(sweep_id=ran[1]))
        *_, none = comparisons.between(session=session, base=CellScope(sweep_id=ran[1]), head=CellScope(sweep_id=ran[2]))
    assert [(c.base.build, c.head.build, c.head.method) for c in changes] == [("b0", "b1", "ngram")]
    assert none == []


def test_a_head_still_queued_or_running_is_pending_not_newly_crashing(client: TestClient, dataset: Path) -> None:
    # Seen on the H200: an A/A head's only job was running when the comparison was read, and it said newly_crashing.
    worker = register_worker(client, builds=BUILDS[:2])
    base = run_cell(client, worker, dataset, "b0", [100.0])
    head = submit(client, sweep_body(dataset, build="b1", repeats=1,
                                     speculative=[{"method": "ngram", "num_speculative_tokens": 3}])).json()["id"]
    with client.app.state.sessionmaker() as session:
        *_, [queued] = comparisons.between(session=session, base=CellScope(sweep_id=base), head=CellScope(sweep_id=head))
    claim(client, worker)
    with client.app.state.sessionmaker() as session:
        *_, [running] = comparisons.between(session=session, base=CellScope(sweep_id=base), head=CellScope(sweep_id=head))
    assert (queued.verdict.value, running.verdict.value) == ("pending", "pending")


def _store(client: TestClient, sweep_id: int, **values: object) -> list[int]:
    """Overwrite the stored results of a sweep, as rows from before the physical ceilings could hold them."""
    with client.app.state.sessionmaker.begin() as session:
        jobs = list(session.scalars(select(Job.id).where(Job.sweep_id == sweep_id)))
        session.execute(update(Result).where(Result.job_id.in_(jobs)).values(**values))
    return jobs


@pytest.mark.parametrize(
    ("values", "note"),
    [({"tokens_per_s": 1e308}, "tokens/s (1e+308) beyond 1e+07"),
     ({"tokens_per_s": math.inf, "tokens_per_s_high": math.inf}, "tokens/s (inf, inf) beyond 1e+07"),
     ({"num_accepted_tokens": 10**6}, "1000000 accepted of 60 draft tokens; its acceptance is left out"),
     ({"accepted_per_position": [21, 0, 0]}, "a position accepted more than the 20 drafts; its acceptance is left out"),
     ({"num_accepted_tokens": -5}, "a negative count; its acceptance is left out")],
    ids=["1e308-tokens-per-s", "infinite-tokens-per-s", "accepted-past-drafted", "position-past-drafts", "negative-count"],
)
def test_one_impossible_stored_result_never_breaks_a_comparison(client: TestClient, dataset: Path, values, note) -> None:
    worker = register_worker(client, builds=BUILDS[:3])
    absurd = run_cell(client, worker, dataset, "b0", [100.0, 101.0])
    base = run_cell(client, worker, dataset, "b1", [100.0, 101.0])
    head = run_cell(client, worker, dataset, "b2", [100.0, 102.0])
    jobs = _store(client, absurd, **values)
    # b0 is history for b1 against b2 (on PostgreSQL its mean overflowed), and a side of its own comparisons.
    compared = client.get("/api/v1/compare", params={"base_sweep": base, "head_sweep": head})
    assert compared.status_code == 200, compared.text
    assert compared.json()["changes"][0]["verdict"] in {"unchanged", "undecided"}
    against = client.get("/api/v1/compare", params={"base_sweep": absurd, "head_sweep": head})
    assert against.status_code == 200, against.text
    [change] = against.json()["changes"]
    assert change["base"]["notes"] == [f"job {job}: {note}" + ("" if "acceptance" in note else ", what no GPU does; left out")
                                       for job in jobs]
    assert change["reasons"][: len(jobs)] == change["base"]["notes"]
    for path, params in (("/compare", {"base": absurd, "head": head}), (f"/sweeps/{absurd}", {}), ("/history", {}),
                         ("/api/v1/alerts", {}), ("/matrix", {"build": "b0"}), ("/fallback", {"build": "b0"}),
                         ("/alarms", {"build": "b0"}), ("/", {}), ("/api/v1/results", {})):
        assert client.get(path, params=params).status_code == 200, path
