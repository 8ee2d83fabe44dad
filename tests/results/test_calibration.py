"""Calibration cells: synthetic acceptance at known rates; the service compares each position with its answer."""

import pytest

from app.analysis.acceptance import calibration_misses, per_position
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body

RATES = [0.8, 0.5, 0.3]


@pytest.mark.parametrize(
    ("accepted", "misses"),
    # 400 drafts: Wilson 95 % half-widths are about 0.04-0.05, so 320/200/120 hold 0.8/0.5/0.3
    # and 280 (0.70) misses 0.8.
    [([320, 200, 120], (False, False, False)), ([280, 200, 120], (True, False, False)), ([320, 200], (False, False, True))],
)
def test_each_position_is_held_to_its_expected_rate(accepted, misses) -> None:
    assert calibration_misses(RATES, per_position(accepted, 400)) == misses


def test_a_calibration_cell_reports_the_rates_it_asked_for_and_whether_it_missed(client, dataset) -> None:
    worker = register_worker(client, gpu_kinds=["H200"])
    synthetic = {"method": "draft_model", "model": "/m", "num_speculative_tokens": 3,
                 "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": RATES}
    sweep = submit(client, sweep_body(dataset, gpu_kinds=["H200"], backends=["FLASH_ATTN"], repeats=2,
                                      speculative=[synthetic])).json()
    for accepted in ([320, 200, 120], [280, 200, 120]):
        job = claim(client, worker)
        result = cell_result() | {"spec_decode": {"num_drafts": 400, "num_draft_tokens": 1200,
                                                  "num_accepted_tokens": sum(accepted), "accepted_per_position": accepted}}
        assert complete(client, job["job_id"], worker, {"result": result, "exit_code": 0}).status_code == 200
    rows = client.get("/api/v1/results", params={"sweep_id": sweep["id"]}).json()
    assert [row["expected_per_position"] for row in rows] == [RATES, RATES]
    assert [row["calibration_miss"] for row in rows] == [False, True]


def test_an_ordinary_cell_is_no_calibration(client, dataset) -> None:
    worker = register_worker(client)
    submit(client, sweep_body(dataset, repeats=1))
    job = claim(client, worker)
    complete(client, job["job_id"], worker, {"result": cell_result(), "exit_code": 0})
    [row] = client.get("/api/v1/results").json()
    assert row["expected_per_position"] is None and row["calibration_miss"] is None
