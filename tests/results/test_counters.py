"""A stored result's ``counter_problems`` as ``GET /api/v1/results`` and ``app.results.counters.of_sweep`` read them
from the stored columns (SQLite and PostgreSQL): empty for consistent counters and for a baseline, the broken rule in
its words for a hand-made broken result."""

from fastapi.testclient import TestClient

from app.results import counters
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body

# 20 drafts of k=3, 30 accepted, but position 2 accepted more than position 1 (cell_result's are [15, 10, 5]).
SWAPPED = {"num_drafts": 20, "num_draft_tokens": 60, "num_accepted_tokens": 30, "accepted_per_position": [10, 15, 5]}


def test_results_carry_the_rules_their_counters_break(client: TestClient, dataset) -> None:
    worker = register_worker(client)
    sweep = submit(client, sweep_body(dataset, repeats=1, baseline=True)).json()
    jobs = {job["spec"]["speculative"]["method"] if job["spec"]["speculative"] else None: job
            for job in (claim(client, worker) for _ in range(3))}
    bodies = {"ngram": cell_result(), "draft_model": cell_result() | {"spec_decode": SWAPPED},
              None: cell_result() | {"spec_decode": None}}
    for method, job in jobs.items():
        assert complete(client, job["job_id"], worker, {"result": bodies[method], "exit_code": 0}).status_code == 200
    rows = {row["method"]: row for row in client.get("/api/v1/results", params={"sweep_id": sweep["id"]}).json()}
    assert rows["draft_model"]["counter_problems"] == ["position 2 accepted 15 > position 1's 10"]
    assert rows["ngram"]["counter_problems"] == [] and rows[None]["counter_problems"] == []
    with client.app.state.sessionmaker() as session:
        found = counters.of_sweep(session=session, sweep_id=sweep["id"])
    assert [(f.job_id, f.where, f.problems) for f in found] == [
        (jobs["draft_model"]["job_id"], "cpu CPU_ATTN NONE, draft_model k=3", ["position 2 accepted 15 > position 1's 10"])]


def test_k_is_read_from_the_cell_spec_and_unknown_without_one() -> None:
    assert counters.depth({"speculative": {"method": "ngram", "num_speculative_tokens": 5}}) == 5
    assert counters.depth({"speculative": None}) is None and counters.depth(None) is None
    assert counters.depth({"speculative": {"method": "ngram", "num_speculative_tokens": True}}) is None
