"""A serving cell's per-request counts (cell schema 9) are shown as an offline cell's are: acceptance by prompt category
on ``/matrix``, the per-request histogram on ``/sweeps/{id}``, a result's ``requests`` in the API, and the counter check
over them."""

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body

# Two prompts of two categories, each sent twice (two passes), summed per prompt: 20 drafts, 60 draft tokens, 30
# accepted (15, 10, 5 by position) in all, as the result's counters (cell_result()'s).
REQUESTS = [
    {"num_output_tokens": 100, "fingerprint": "a", "category": "qa", "num_drafts": 12, "num_draft_tokens": 36,
     "num_accepted_tokens": 24, "accepted_per_position": [12, 8, 4]},
    {"num_output_tokens": 100, "fingerprint": "b", "category": "coding", "num_drafts": 8, "num_draft_tokens": 24,
     "num_accepted_tokens": 6, "accepted_per_position": [3, 2, 1]},
]
SERVING = {"concurrency": 2, "ttft_ms": {"p50": 20.0, "p90": 30.0, "p99": 40.0}, "tpot_ms": {"p50": 5.0, "p90": 6.0, "p99": 7.0},
           "itl_ms": {"p50": 5.0, "p90": 6.0, "p99": 7.0}, "output_tokens_per_s": 100.0, "requests_per_s": 1.0,
           "completed": 4, "failed": 0, "empty": 0}


def _served(client: TestClient, dataset: Path, requests: list[dict[str, Any]], name: str) -> tuple[int, int]:
    """A one-repeat serving sweep of one ngram cell at two clients whose result has ``requests``: (sweep, job)."""
    worker = register_worker(client)
    body = sweep_body(dataset, name=name, repeats=1, mode="serve", concurrency=[2],
                      speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    sweep = submit(client, body)
    assert sweep.status_code == 201, sweep.text
    job = claim(client, worker)
    result = {**cell_result(), "schema_version": 9, "requests": requests, "serving": SERVING}
    assert complete(client, job["job_id"], worker, {"result": result, "exit_code": 0}).status_code == 200
    return sweep.json()["id"], job["job_id"]


def test_a_serving_cells_requests_show_by_category_on_the_matrix_and_in_the_api(client: TestClient, dataset: Path) -> None:
    sweep_id, _ = _served(client, dataset, REQUESTS, "served")
    [row] = client.get("/api/v1/results", params={"sweep_id": sweep_id}).json()
    assert row["mode"] == "serve" and row["counter_problems"] == []
    by_name = {c["category"]: c for c in row["requests"]["categories"]}
    assert {name: (c["requests"], c["accepted"], c["draft_tokens"]) for name, c in by_name.items()} == {
        "coding": (1, 6, 24), "qa": (1, 24, 36)}
    assert sum(row["requests"]["rate_bins"]) == 2
    html = client.get(f"/matrix?sweep_id={sweep_id}").text
    table = html.split('id="categories"')[1].split("</table>")[0]
    assert "<td>coding</td>" in table and "<td>qa</td>" in table and "24 / 36" in table and "not recorded" not in table
    sweep_page = client.get(f"/sweeps/{sweep_id}").text
    assert 'id="request-chart"' in sweep_page and 'id="per-request-none"' not in sweep_page


def test_a_serving_cells_requests_that_do_not_add_up_are_a_counter_problem(client: TestClient, dataset: Path) -> None:
    short = [REQUESTS[0], {**REQUESTS[1], "num_drafts": 7}]
    sweep_id, _ = _served(client, dataset, short, "short")
    [row] = client.get("/api/v1/results", params={"sweep_id": sweep_id}).json()
    assert row["counter_problems"] == ["requests count 19 drafts in all, the run's counters 20"]


def test_a_serving_cell_without_per_request_counts_reads_not_recorded(client: TestClient, dataset: Path) -> None:
    # A serving cell before schema 9, or one with a measured request that reported none: no counts, not zeros.
    plain = [{"num_output_tokens": 100, "fingerprint": f} for f in ("a", "b")]
    sweep_id, _ = _served(client, dataset, plain, "plain")
    [row] = client.get("/api/v1/results", params={"sweep_id": sweep_id}).json()
    assert row["requests"] is None and row["counter_problems"] == []
    html = client.get(f"/matrix?sweep_id={sweep_id}").text
    assert "serving cells before schema 9" in html.split('id="categories"')[1]
    assert 'id="per-request-none"' in client.get(f"/sweeps/{sweep_id}").text
