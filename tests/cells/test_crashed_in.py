"""``PooledCell.crashed_in``: the starts of a cell that died and kept their log, read by the one query that pools the
cell's jobs, on SQLite and PostgreSQL."""

from fastapi.testclient import TestClient

from app.cells import service as cells
from app.cells.scope import CellScope
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body, upload_log
from tests.statements import recorded

NGRAM = [{"method": "ngram", "num_speculative_tokens": 3}]
LOG = "INFO engine started\nRuntimeError: CUDA error: an illegal memory access was encountered\n"


def died_four_ways(client: TestClient, dataset, **body) -> tuple[int, list[int]]:
    """One n-gram cell's four starts: crashed with its log, crashed without one (the service refused it), timed out
    with its log, and measured; the sweep's id and the four jobs' ids in that order."""
    worker = register_worker(client)
    sweep = submit(client, sweep_body(dataset, repeats=4, **{"speculative": NGRAM} | body)).json()
    jobs = [claim(client, worker)["job_id"] for _ in range(4)]
    for job, logged, outcome in zip(jobs, (True, False, True, False), (
            {"exit_code": 1}, {"exit_code": 1}, {"timed_out": True}, {"result": cell_result(), "exit_code": 0}), strict=True):
        if logged:
            assert upload_log(client, job, worker, LOG).status_code == 204
        assert complete(client, job, worker, outcome).status_code == 200
    return sweep["id"], jobs


def test_a_cell_links_the_deaths_whose_log_was_kept_and_counts_the_one_without(client: TestClient, dataset) -> None:
    sweep, (crashed, bare, timed_out, measured) = died_four_ways(client, dataset)
    with client.app.state.sessionmaker() as session:
        [cell] = cells.load(session=session, scope=CellScope(sweep_id=sweep))
    assert cell.crashed_in == [crashed, timed_out]
    assert cell.measured_in == {measured: sweep} and cell.died == 3 and sum(cell.crash_kinds.values()) == 3
    for job in cell.crashed_in:
        assert client.get(f"/api/v1/jobs/{job}/log").status_code == 200
    assert client.get(f"/api/v1/jobs/{bare}/log").status_code == 404


def test_the_deaths_logs_cost_no_query_per_cell(client: TestClient, dataset) -> None:
    """Pages read every cell of ten builds at once (``/matrix``, p95 under 500 ms over 100,000 results): whether a dead
    start kept its log is read with the jobs, so one cell or five with deaths take as many statements."""
    one, _ = died_four_ways(client, dataset)
    five, _ = died_four_ways(client, dataset, backends=["CPU_ATTN"], graph_modes=["NONE", "PIECEWISE", "FULL"],
                             speculative=[*NGRAM, {"method": "ngram", "num_speculative_tokens": 5}])
    counts = []
    for sweep in (one, five):
        with recorded(client.app.state.engine) as statements, client.app.state.sessionmaker() as session:
            found = cells.load(session=session, scope=CellScope(sweep_id=sweep))
        counts.append(len(statements))
        assert all(cell.crashed_in for cell in found if cell.died)
    assert len(found) == 6 and counts[0] == counts[1], counts
