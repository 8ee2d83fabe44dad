"""``/api/v1/parallel`` and ``/matrix``'s section of tensor-parallel cells, over results stored through the worker
protocol: each number on the page and in the answer traced to the results it came from."""

import math

import pytest

from tests.dashboards.test_pages import tables
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body

COLUMNS = ["GPU", "method", "backend", "graph mode", "sizes (target, draft)", "acceptance", "one GPU",
           "difference, points [95 %]", "acceptance", "tokens/s against one GPU [95 %]", "starts (cell / one GPU)", "runs"]


def _stored(client, dataset, *, accepted: dict[int, int], speeds: dict[int, list[float]]) -> int:
    """A sweep of one n-gram cell at tensor_parallel_size 1 and 2 (an axis), two starts each, reported as given."""
    worker = register_worker(client)
    body = sweep_body(dataset, repeats=2, engine_args={"max_num_seqs": 8, "tensor_parallel_size": [1, 2]},
                      speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    sweep = submit(client, body)
    assert sweep.status_code == 201, sweep.text
    for _ in range(4):
        job = claim(client, worker)
        size = job["spec"]["engine_args"]["tensor_parallel_size"]
        result = cell_result(tokens_per_s=speeds[size].pop(0), accepted=accepted[size])
        assert complete(client, job["job_id"], worker, {"result": result}).status_code == 200
    return sweep.json()["id"]


def test_the_answer_pairs_the_two_gpu_cell_with_its_one_gpu_twin(client, dataset) -> None:
    # 60 draft tokens a start: 2 x 30 of 120 at one GPU against 2 x 29 of 120 at two; tokens/s 100, 110 against 150, 160.
    sweep = _stored(client, dataset, accepted={1: 30, 2: 29}, speeds={1: [100.0, 110.0], 2: [150.0, 160.0]})
    [twin] = client.get("/api/v1/parallel", params={"sweep_id": sweep}).json()
    assert (twin["tensor_parallel_size"], twin["draft_tensor_parallel_size"], twin["label"]) == (
        2, None, "ngram k=3 tensor_parallel_size=2")
    assert (twin["one_gpu_acceptance"], twin["acceptance"]) == (0.5, pytest.approx(58 / 120))
    assert twin["acceptance_difference"] == pytest.approx(58 / 120 - 0.5) and twin["acceptance_differs"] is False
    # The medians of two starts: 105 and 155.
    assert twin["speed_ratio"] == pytest.approx(155 / 105) and twin["speed_ratio_low"] < 155 / 105 < twin["speed_ratio_high"]
    assert (twin["starts"], twin["one_gpu_starts"], len(twin["jobs"]), len(twin["one_gpu_jobs"])) == (2, 2, 2, 2)
    assert twin["sentence"].startswith("tensor_parallel_size=2: acceptance 0.483 against 0.500 on one GPU, -1.7 points [")


def test_the_matrix_shows_the_twin_and_marks_an_acceptance_that_moved(client, dataset) -> None:
    # 2 x 10 of 120 at two GPUs against 2 x 40 of 120 at one: -50 points, far beyond the test's level.
    sweep = _stored(client, dataset, accepted={1: 40, 2: 10}, speeds={1: [100.0, 100.0], 2: [100.0, 100.0]})
    html = client.get("/matrix", params={"sweep_id": sweep}).text
    assert 'id="parallel"' in html and "Tensor-parallel cells against one GPU" in html
    header, *rows = tables(html)["parallel-cells"]
    assert header[1] == COLUMNS
    [(cls, cells)] = rows
    row = dict(zip(COLUMNS[:8], cells[:8], strict=True))
    assert cls == "alarm" and cells[8] == "differs"
    assert (row["method"], row["sizes (target, draft)"], row["acceptance"], row["one GPU"]) == (
        "ngram k=3 tensor_parallel_size=2", "2, unset", "0.167", "0.667")
    assert row["difference, points [95 %]"].startswith("-50.0 [")
    # Equal medians: 1.00x, with the interval the two starts' spreads allow (none here: both starts alike).
    assert cells[9].startswith("1.00")
    assert math.isclose(client.get("/api/v1/parallel", params={"sweep_id": sweep}).json()[0]["acceptance_difference"], -0.5)


def test_a_sweep_without_parallel_cells_shows_no_section_and_answers_none(client, dataset) -> None:
    worker = register_worker(client)
    sweep = submit(client, sweep_body(dataset, repeats=1, speculative=[{"method": "ngram", "num_speculative_tokens": 3}]))
    job = claim(client, worker)
    assert complete(client, job["job_id"], worker, {"result": cell_result()}).status_code == 200
    assert client.get("/api/v1/parallel", params={"sweep_id": sweep.json()["id"]}).json() == []
    assert 'id="parallel"' not in client.get("/matrix", params={"sweep_id": sweep.json()["id"]}).text
