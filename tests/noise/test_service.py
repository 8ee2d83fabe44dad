"""app.noise.service: the noise model of the A/A groups stored through the worker protocol, figures by hand."""

import math
from pathlib import Path

from fastapi.testclient import TestClient

from app.analysis.noise import NoiseClass, pooled_spread
from app.noise import service as noise
from tests.factories import Registered, cell_result, claim, complete, register_worker, submit, sweep_body

# Each start's three rounds run at its speed, its speed and its speed x e^0.2 (its median is its speed).
ROUNDS = (1.0, 1.0, math.exp(0.2))


def result_at(speed: float) -> dict:
    rounds = [{"seconds": 1000 / (speed * f), "output_tokens": 1000, "num_requests": 2} for f in ROUNDS]
    return {**cell_result(tokens_per_s=speed), "rounds": rounds}


def run(client: TestClient, worker: Registered, dataset: Path, build: str, speeds: dict[str | None, list[float]]) -> None:
    """A sweep of ``build`` with an n-gram cell and its baseline, each start reported at the next speed of its method."""
    repeats = len(next(iter(speeds.values())))
    body = sweep_body(dataset, build=build, repeats=repeats, baseline=True,
                      speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    assert submit(client, body).status_code == 201
    left = {method: list(values) for method, values in speeds.items()}
    for _ in range(2 * repeats):
        job = claim(client, worker)
        method = (job["spec"].get("speculative") or {}).get("method")
        assert complete(client, job["job_id"], worker, {"result": result_at(left[method].pop(0))}).status_code == 200


def test_each_class_pools_its_cells_starts_and_a_single_start_adds_nothing(client: TestClient, dataset: Path) -> None:
    worker = register_worker(client, builds=("b1", "b2"))
    run(client, worker, dataset, "b1", {"ngram": [100.0, 400.0], None: [1000.0, 1000.0 * math.exp(0.1)]})
    # One start per cell: no A/A, so no spread, and no count.
    run(client, worker, dataset, "b2", {"ngram": [5.0], None: [7.0]})
    with client.app.state.sessionmaker() as session:
        found = {c.noise_class: c for c in noise.model(session=session)}
    assert list(found) == [NoiseClass("cpu", "CPU_ATTN", "NONE", "draft", "offline", None),
                           NoiseClass("cpu", "CPU_ATTN", "NONE", "none", "offline", None)]
    draft, none = found.values()
    # Draft: ln 100 and ln 400, ln 4 apart: squares 2 (ln 2)^2 over 1 degree of freedom.
    assert math.isclose(draft.between.sd, math.sqrt(2) * math.log(2))
    assert (draft.between.df, draft.between.groups, draft.between.values) == (1, 1, 2)
    # Baseline: 0.1 apart, s = 0.1 / sqrt 2.
    assert math.isclose(none.between.sd, 0.1 / math.sqrt(2))
    # Within a start: logs (l, l, l + 0.2), squares 0.2^2 x 2/3 over 2 degrees of freedom, the same in each start:
    # s = 0.2 / sqrt 3, 2 starts x 2 = 4 degrees of freedom per class.
    for c in (draft, none):
        assert math.isclose(c.within.sd, 0.2 / math.sqrt(3)) and c.within.df == 4 and c.within.groups == 2
        assert c.hosts == ("h",) and c.newest is not None
    # MDE at 3 a side, df 1 + 2 + 2 = 5 (the new starts join the pool): (2.57058 + 0.91954) x s sqrt(2/3).
    assert math.isclose(none.detectable(3), math.exp((2.57058 + 0.91954) * 0.1 / math.sqrt(2) * math.sqrt(2 / 3)) - 1,
                        rel_tol=1e-4)


def test_a_noisy_backend_or_graph_mode_leaves_the_others_spread_alone(client: TestClient, dataset: Path) -> None:
    # One build's n-gram cell on two backends x two graph modes of one GPU kind, two starts each. FLASHINFER with
    # PIECEWISE graphs spreads by a factor of 4 (as FlashInfer's draft cells spread on the H200,
    # tests/data/h200-2026-12-04b); the others by e^0.1, e^0.02 and e^0.3.
    apart = {("FLASH_ATTN", "PIECEWISE"): 0.1, ("FLASH_ATTN", "FULL_AND_PIECEWISE"): 0.02,
             ("FLASHINFER", "PIECEWISE"): math.log(4), ("FLASHINFER", "FULL_AND_PIECEWISE"): 0.3}
    worker = register_worker(client, gpu_kinds=("H200",), builds=("b1",))
    body = sweep_body(dataset, build="b1", repeats=2, gpu_kinds=["H200"], backends=["FLASH_ATTN", "FLASHINFER"],
                      graph_modes=["PIECEWISE", "FULL_AND_PIECEWISE"], speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    assert submit(client, body).status_code == 201
    started: dict[tuple[str, str], int] = {}
    for _ in range(8):
        job = claim(client, worker)
        where = (job["spec"]["backend"], job["spec"]["graph_mode"])
        started[where] = started.get(where, -1) + 1
        speed = 100.0 * math.exp(apart[where] * started[where])
        assert complete(client, job["job_id"], worker, {"result": result_at(speed)}).status_code == 200
    with client.app.state.sessionmaker() as session:
        found = {c.noise_class: c for c in noise.model(session=session)}
    # Four classes, one cell of two starts each, in (backend, graph mode) order: each two starts d apart give
    # s^2 = 2 (d/2)^2 / 1, s = d / sqrt 2 on 1 degree of freedom, the others' starts not counted.
    assert list(found) == [NoiseClass("H200", backend, graph_mode, "draft", "offline", None) for backend, graph_mode in sorted(apart)]
    for (backend, graph_mode), d in apart.items():
        between = found[NoiseClass("H200", backend, graph_mode, "draft", "offline", None)].between
        assert math.isclose(between.sd, d / math.sqrt(2)) and (between.df, between.groups, between.values) == (1, 1, 2)
    # FLASH_ATTN with PIECEWISE: s = 0.1 / sqrt 2 = 0.0707, CV 7.33 %, where one class of all four (as before the
    # classes held backend and graph mode) gives it sqrt(((ln 4)^2 + 0.1^2 + 0.02^2 + 0.3^2) / 2 / 4) = 0.5028.
    assert math.isclose(pooled_spread([0.0, d] for d in apart.values()).sd, 0.50277, abs_tol=5e-6)
    page = client.get("/noise").text
    assert '<td>FLASH_ATTN</td><td>PIECEWISE</td><td>with a draft</td>\n<td>offline</td>\n<td class="num">7.33 %</td>' in page
    rows = client.get("/api/v1/noise").json()
    assert [(r["backend"], r["graph_mode"]) for r in rows] == sorted(apart)


def test_no_store_no_model(client: TestClient) -> None:
    with client.app.state.sessionmaker() as session:
        assert noise.model(session=session) == []


def test_the_model_is_kept_until_another_job_succeeds(client: TestClient, dataset: Path) -> None:
    worker = register_worker(client, builds=("b1",))
    run(client, worker, dataset, "b1", {"ngram": [100.0, 400.0], None: [1000.0, 1000.0]})
    with client.app.state.sessionmaker() as session:
        first = noise.model(session=session)
        assert noise.model(session=session) is first  # nothing succeeded since: the kept model
    run(client, worker, dataset, "b1", {"ngram": [200.0, 200.0], None: [1000.0, 1000.0]})
    with client.app.state.sessionmaker() as session:
        again = noise.model(session=session)
        assert again is not first and again == noise.read(session=session)


def test_a_paired_aa_teaches_the_spread_of_a_pairs_difference(client: TestClient, dataset: Path) -> None:
    worker = register_worker(client, builds=("b1",))
    body = sweep_body(dataset, build="b1", repeats=2, speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    base = submit(client, body).json()
    assert submit(client, body | {"name": "again", "paired_with": base["id"]}).status_code == 201
    # Two pairs whose halves drift together (100 then 110; 200 then 180): the halves differ by ln 1.1 and ln 0.9,
    # where the four starts spread by a factor of two.
    for _ in range(4):
        job = claim(client, worker)
        done = client.get(f"/api/v1/jobs/{job['job_id']}").json()
        level, drifted = (100.0, 1.1) if done["repeat"] == 0 else (200.0, 0.9)
        speed = level * (drifted if done["pair_order"] == 1 else 1.0)
        assert complete(client, job["job_id"], worker, {"result": result_at(speed)}).status_code == 200
    with client.app.state.sessionmaker() as session:
        [found] = noise.spreads(session=session).values()
    # s_p^2 = ((ln 1.1)^2 + (ln 0.9)^2) / 2 on 2 pairs; the unpaired starts: one cell of 4, ln 100, 110, 200, 180.
    assert math.isclose(found.paired.sd, math.sqrt((math.log(1.1) ** 2 + math.log(0.9) ** 2) / 2)) and found.paired.df == 2
    logs = [math.log(v) for v in (100.0, 110.0, 200.0, 180.0)]
    mean = sum(logs) / 4
    assert math.isclose(found.between.sd, math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)) and found.between.df == 3
    assert found.paired.sd < found.between.sd / 3
    # exp(0.100462) - 1 = 10.57 %, on 2 pairs: on the page and in the API.
    assert "10.57 % (2)" in client.get("/noise").text
    [row] = client.get("/api/v1/noise").json()
    assert row["paired_df"] == 2 and math.isclose(row["paired_sd"], math.sqrt((math.log(1.1) ** 2 + math.log(0.9) ** 2) / 2))


def test_the_service_reads_the_verdicts_spreads_at_its_start_and_on_its_schedule(client: TestClient, dataset: Path,
                                                                                 make_client, monkeypatch) -> None:
    # So neither a comparison's first reader after a start, or after a job succeeded, nor the first view of /noise
    # waits for every start's row.
    worker = register_worker(client, builds=("b1",))
    run(client, worker, dataset, "b1", {"ngram": [100.0, 400.0], None: [1000.0, 1000.0]})
    reads = []
    monkeypatch.setattr(noise, "read", lambda **kw: reads.append(1) or [])
    restarted = make_client()  # a new service over the same store; its start reads the model once
    assert len(reads) == 1
    with restarted.app.state.sessionmaker() as session:
        noise.spreads(session=session)
        noise.model(session=session)
    assert restarted.get("/noise").status_code == 200
    assert len(reads) == 1  # kept, for the verdicts and the page: nothing succeeded since
    noise.refresh(restarted.app.state.sessionmaker)
    assert len(reads) == 1
    run(client, worker, dataset, "b1", {"ngram": [200.0], None: [1000.0]})
    with restarted.app.state.sessionmaker() as session:
        noise.spreads(session=session)  # a comparison reads first after the job succeeded
    noise.refresh(restarted.app.state.sessionmaker)  # then the schedule's turn: what the comparison read is kept
    assert len(reads) == 2
