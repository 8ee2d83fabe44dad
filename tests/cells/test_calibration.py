"""Calibration cells: each position's measured rate against the rate asked for, over a config's pooled engine starts."""

from fastapi.testclient import TestClient

from app.cells import calibration
from app.cells import service as cells
from app.cells.scope import CellScope
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body

LOW, HIGH = [0.8, 0.5, 0.3], [0.9, 0.6, 0.2]


def _rounded(position: calibration.Position) -> tuple:
    measured = tuple(round(v, 4) for v in position.measured) if position.measured else None
    return position.number, position.expected, measured, position.accepted, position.drafts, position.miss


def test_each_position_is_its_rate_with_wilson_interval_and_a_miss_where_the_interval_excludes_the_asked_rate() -> None:
    # 80 and 40 of 100 drafts, z = 1.96: Wilson's centre (p + z²/2n) / (1 + z²/n), half-width
    # z sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n): 0.7889 +- 0.0777 holds 0.8; 0.4037 +- 0.0943 = [0.3094, 0.4980] misses 0.5.
    assert [_rounded(p) for p in calibration.positions([0.8, 0.5], [80, 40], 100)] == [
        (1, 0.8, (0.8, 0.7112, 0.8666), 80, 100, False),
        (2, 0.5, (0.4, 0.3094, 0.4980), 40, 100, True),
    ]


def test_a_position_asked_for_and_not_measured_or_measured_and_not_asked_for_is_a_miss() -> None:
    assert [_rounded(p) for p in calibration.positions([0.8, 0.5, 0.3], [80, 40], 100)][2] == (3, 0.3, None, None, 100, True)
    assert [_rounded(p) for p in calibration.positions([0.8], [80, 40], 100)][1] == (2, None, (0.4, 0.3094, 0.4980), 40, 100, True)
    assert [_rounded(p) for p in calibration.positions([0.5], [0], 0)] == [(1, 0.5, None, 0, 0, True)]


def _synthetic(rates: list[float]) -> dict:
    return {"method": "draft_model", "model": "/m", "num_speculative_tokens": 3, "rejection_sample_method": "synthetic",
            "synthetic_acceptance_rates": rates}


def _ran(client: TestClient, dataset) -> int:
    """One sweep, two engine starts of each of: two calibration configs alike but for their rates, and an ordinary
    n-gram cell. The (0.8, 0.5, 0.3) config's starts accept 320/200/120 and 280/200/120 of 400 drafts; the other's
    360/240/80 twice."""
    worker = register_worker(client, gpu_kinds=["H200"])
    body = sweep_body(dataset, name="cal", gpu_kinds=["H200"], backends=["FLASH_ATTN"], repeats=2,
                      speculative=[_synthetic(LOW), _synthetic(HIGH), {"method": "ngram", "num_speculative_tokens": 3}])
    sweep = submit(client, body).json()
    low = iter([[320, 200, 120], [280, 200, 120]])
    for _ in range(6):
        job = claim(client, worker)
        rates = job["spec"]["speculative"].get("synthetic_acceptance_rates")
        accepted = next(low) if rates == LOW else [360, 240, 80] if rates == HIGH else [15, 10, 5]
        drafts = 400 if rates else 20
        result = cell_result() | {"spec_decode": {"num_drafts": drafts, "num_draft_tokens": 3 * drafts,
                                                  "num_accepted_tokens": sum(accepted), "accepted_per_position": accepted}}
        assert complete(client, job["job_id"], worker, {"result": result, "exit_code": 0}).status_code == 200
    return sweep["id"]


def test_the_calibration_cells_of_a_scope_with_their_pooled_starts_and_labels_none_shared(client: TestClient, dataset) -> None:
    sweep_id = _ran(client, dataset)
    with client.app.state.sessionmaker() as session:
        found = calibration.load(session=session, scope=CellScope(sweep_id=sweep_id))
    # The n-gram cell asked for no rates (its result holds JSON null): it is not read.
    assert sorted(c.expected for c in found) == [tuple(LOW), tuple(HIGH)]
    # Two configs of one sweep, alike but for their rates: one row each, told apart by the rates asked for.
    assert sorted(c.label for c in found) == [f"H200 · FLASH_ATTN · NONE · draft_model k=3 · asked {rates} · vllm-test"
                                              for rates in ("0.8/0.5/0.3", "0.9/0.6/0.2")]
    low = next(c for c in found if c.expected == tuple(LOW))
    # Pooled: 600/400/240 of 800 drafts. 0.75 +- 0.0300 = [0.7188, 0.7788] misses 0.8, though only the second start
    # (280/400 = 0.70) missed on its own counts; 0.5 [0.4654, 0.5346] and 0.3 [0.2693, 0.3326] hold theirs.
    assert (low.starts, low.rounds, low.starts_missed, low.missed) == (2, 2, 1, (1,))
    assert [_rounded(p) for p in low.positions] == [
        (1, 0.8, (0.75, 0.7188, 0.7788), 600, 800, True),
        (2, 0.5, (0.5, 0.4654, 0.5346), 400, 800, False),
        (3, 0.3, (0.3, 0.2693, 0.3326), 240, 800, False),
    ]
    high = next(c for c in found if c.expected == tuple(HIGH))
    assert not high.miss and (high.starts, high.starts_missed) == (2, 0)


def test_a_scope_without_calibration_reads_every_cell(client: TestClient, dataset) -> None:
    _ran(client, dataset)
    with client.app.state.sessionmaker() as session:
        assert len(cells.load(session=session, scope=CellScope())) == 3


def test_configs_asking_the_same_rates_of_other_drafts_are_told_apart_by_their_drafts(client: TestClient, dataset) -> None:
    worker = register_worker(client, gpu_kinds=["H200"])
    body = sweep_body(dataset, gpu_kinds=["H200"], backends=["FLASH_ATTN"], repeats=1,
                      speculative=[_synthetic(LOW), _synthetic(LOW) | {"model": "/other-draft"}])
    sweep = submit(client, body).json()
    for _ in range(2):
        job = claim(client, worker)
        assert complete(client, job["job_id"], worker, {"result": cell_result(), "exit_code": 0}).status_code == 200
    with client.app.state.sessionmaker() as session:
        found = calibration.load(session=session, scope=CellScope(sweep_id=sweep["id"]))
    assert sorted(c.label for c in found) == [f"H200 · FLASH_ATTN · NONE · draft_model k=3 {draft} · asked 0.8/0.5/0.3 · vllm-test"
                                              for draft in ("draft=m", "draft=other-draft")]
