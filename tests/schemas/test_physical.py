"""A worker's counts are integers: JSON's true is refused where pydantic took it as 1."""

import pytest

from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body


@pytest.mark.parametrize(
    ("change", "loc"),
    [({"output_tokens": True}, ["output_tokens"]),
     ({"num_requests": False}, ["num_requests"]),
     ({"spec_decode": {"num_drafts": 20, "num_draft_tokens": 60, "num_accepted_tokens": True}}, ["spec_decode", "num_accepted_tokens"]),
     ({"requests": [{"num_output_tokens": True, "fingerprint": "a"}]}, ["requests", 0, "num_output_tokens"])],
    ids=["output-tokens", "requests", "accepted", "a-request"],
)
def test_a_count_given_as_a_bool_is_422_naming_it(client, dataset, change, loc) -> None:
    # Before: output_tokens: true was stored as 1 token.
    worker = register_worker(client)
    assert submit(client, sweep_body(dataset, repeats=1)).status_code == 201
    job = claim(client, worker)
    response = complete(client, job["job_id"], worker, {"result": cell_result() | change})
    assert response.status_code == 422, response.text
    error = response.json()["detail"][0]
    assert error["loc"] == ["body", "outcome", "result", *loc], error
    assert "must be a count, an integer from 0 to 1000000000000000, not " in error["msg"], error
    assert complete(client, job["job_id"], worker, {"result": cell_result()}).status_code == 200
