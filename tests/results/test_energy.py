"""A result's energy as the service stores and serves it: joules over the measured rounds, tokens per joule with
its rounds' interval, and why there is none where the GPU did not report it (never 0)."""

import csv
import io
from pathlib import Path

from fastapi.testclient import TestClient

from tests.factories import cell_result, claim, complete, energy_result, register_worker, submit, sweep_body

NVML_SAYS = "not reported (NVML: Not Supported)"


def _stored(client: TestClient, dataset: Path, outcomes: list[dict]) -> list[dict]:
    worker = register_worker(client)
    body = sweep_body(dataset, repeats=len(outcomes), speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    sweep = submit(client, body).json()
    for result in outcomes:
        job = claim(client, worker)
        answer = complete(client, job["job_id"], worker, {"result": result})
        assert answer.status_code == 200, answer.text
    return sorted(client.get("/api/v1/results", params={"sweep_id": sweep["id"]}).json(), key=lambda r: r["job_id"])


def test_joules_tokens_per_joule_and_its_interval_are_stored_and_served(client: TestClient, dataset: Path) -> None:
    # Five rounds of 1,000 tokens on 400, 500, 250, 500 and 800 J: 2.5, 2.0, 4.0, 2.0, 1.25 tokens/J.
    measured, cpu, schema6 = _stored(client, dataset, [
        energy_result([400.0, 500.0, 250.0, 500.0, 800.0]),
        energy_result([None] * 5, reason="not reported (the CPU engine)"),
        {**cell_result(), "schema_version": 6},
    ])
    assert measured["energy_j"] == 2450.0
    assert (measured["tokens_per_joule"], measured["tokens_per_joule_low"], measured["tokens_per_joule_high"]) == (2.0, 1.25, 4.0)
    assert measured["tokens_per_joule_level"] == 0.9375 and measured["energy_reason"] is None
    # A cell of a schema before energy has no reason, as the rows stored before migration 0023 have none.
    for row, why in ((cpu, "not reported (the CPU engine)"), (schema6, None)):
        assert (row["energy_j"], row["tokens_per_joule"], row["tokens_per_joule_level"]) == (None, None, None)
        assert row["energy_reason"] == why
    lines = list(csv.DictReader(io.StringIO(client.get("/api/v1/results.csv", params={"sweep_id": measured["sweep_id"]}).text)))
    assert [(line["tokens_per_joule"], line["energy_reason"]) for line in lines] == [
        ("2.0", ""), ("", "not reported (the CPU engine)"), ("", "")]


def test_a_round_the_meter_missed_leaves_the_start_without_tokens_per_joule(client: TestClient, dataset: Path) -> None:
    [row] = _stored(client, dataset, [energy_result([400.0, None, 500.0], reason=NVML_SAYS)])
    assert (row["energy_j"], row["tokens_per_joule"], row["energy_reason"]) == (None, None, NVML_SAYS)


def test_energy_no_gpu_can_use_is_refused_naming_the_field(client: TestClient, dataset: Path) -> None:
    worker = register_worker(client)
    submit(client, sweep_body(dataset, repeats=1))
    job = claim(client, worker)
    answer = complete(client, job["job_id"], worker, {"result": energy_result([1e-4])})  # 1e7 tokens/J: no GPU
    assert answer.status_code == 422
    assert "rounds" in answer.text and "tokens/J" in answer.text
    answer = complete(client, job["job_id"], worker, {"result": energy_result([-5.0])})
    assert answer.status_code == 422 and "energy_j" in answer.text
