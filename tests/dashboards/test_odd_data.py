"""Pages over ordinary and odd stored states: cells in every job state and mixes of them (values missing as pandas 3
holds them), and extreme stored dates and values. Each page answers 200, HTML and CSV, for every metric."""

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app import db
from app.models import Build, Job, Result
from dashboards.figures.heatmap import METRICS
from tests.conftest import AUTH
from tests.dashboards import shown
from tests.dashboards.test_pages import tables
from tests.factories import HISTORY_BUILDS, Registered, cell_result, claim, complete, register_worker, submit, sweep_body

NGRAM = [{"method": "ngram", "num_speculative_tokens": 3}]
CRASHED = {"exit_code": 1, "duration_s": 3}
OUTCOMES: dict[str, dict[str, Any] | None] = {
    "succeeded": {"result": cell_result(), "exit_code": 0},
    "crashed": CRASHED,
    "timed_out": {"timed_out": True, "signal": 9, "duration_s": 600},
    "failed": {"error": "the build's python is missing"},
    "running": None,  # claimed, never reported
}


def _sweep(client: TestClient, worker: Registered, body: dict, outcomes: list[str]) -> int:
    """Submit ``body``, then claim one job per outcome and report it so (``running``: claimed only); the rest
    stay queued. The sweep's id."""
    response = submit(client, body)
    assert response.status_code == 201, response.text
    for outcome in outcomes:
        job = claim(client, worker)
        if OUTCOMES[outcome] is not None:
            assert complete(client, job["job_id"], worker, OUTCOMES[outcome]).status_code == 200
    return response.json()["id"]


def _stored_speed(client: TestClient, job_id: int, speed: float) -> None:
    """A result row at ``speed`` tokens/s, as a database written before the ceilings on reports may hold one
    (``complete`` now refuses such a report)."""
    with client.app.state.sessionmaker.begin() as session:
        session.execute(update(Result).where(Result.job_id == job_id)
                        .values(tokens_per_s=speed, tokens_per_s_low=speed, tokens_per_s_high=speed))


def _views(*extra: str) -> list[str]:
    views = ["/", "/fallback", "/alarms", "/compare", "/history", "/calibration", "/crashes", "/noise", *extra,
             *(f"/matrix?metric={metric}" for metric in METRICS)]
    return views + [f"{v}{'&' if '?' in v else '?'}format=csv" for v in views if v.split("?")[0] not in ("/", "/crashes", "/noise")
                    and not v.startswith("/sweeps/")]


def _all_answer(client: TestClient, views: list[str]) -> dict[str, str]:
    pages = {}
    for view in views:
        response = client.get(view)
        assert response.status_code == 200, (view, response.text[-2000:])
        pages[view] = response.text
    return pages


def _no_missing_written(pages: dict[str, str]) -> None:
    for view, html in pages.items():
        if "format=csv" not in view:
            assert ">nan<" not in html and "(nan)" not in html and ">None<" not in html, view


def test_matrix_by_speedup_shows_a_cell_whose_baseline_crashed(client: TestClient, dataset) -> None:
    worker = register_worker(client)
    body = sweep_body(dataset, repeats=1, baseline=True, speculative=NGRAM)
    response = submit(client, body)
    for _ in range(2):
        job = claim(client, worker)
        outcome = CRASHED if job["spec"]["speculative"] is None else {"result": cell_result(), "exit_code": 0}
        assert complete(client, job["job_id"], worker, outcome).status_code == 200
    html = client.get(f"/matrix?sweep_id={response.json()['id']}&metric=speedup")
    assert html.status_code == 200, html.text[-2000:]
    # The n-gram cell ran but has no speedup: its panel says why; the baseline's says how it died (exit 1, no log).
    panels = [figure.texts() for figure in shown.figures(client, html.text)]
    assert [("exit" in texts, "no baseline ran" in texts) for texts in panels] == [(True, False), (False, True)]
    rows = {cells[1]: cells for _, cells in tables(html.text)["cells"][1:]}
    assert rows["ngram k=3"][10] == "" and rows["baseline"][12].startswith("crashed 1")  # speedup, runs


def test_a_submitted_sweeps_speculative_cell_has_its_speedup_over_the_baseline(client: TestClient, dataset) -> None:
    """A baseline submitted through the API stores ``"speculative": null``: it is still its cells' baseline (it
    once was none's, and every speedup of a submitted sweep was blank)."""
    worker = register_worker(client)
    response = submit(client, sweep_body(dataset, repeats=2, baseline=True, speculative=NGRAM))
    for _ in range(4):
        job = claim(client, worker)
        speed = 100.0 if job["spec"]["speculative"] is None else 150.0
        assert complete(client, job["job_id"], worker, {"result": cell_result(tokens_per_s=speed)}).status_code == 200
    html = client.get(f"/matrix?sweep_id={response.json()['id']}&metric=speedup").text
    rows = {cells[1]: cells for _, cells in tables(html)["cells"][1:]}
    assert rows["ngram k=3"][10].startswith("1.50") and rows["baseline"][10] == ""  # speedup
    panels = [figure.texts() for figure in shown.figures(client, html)]
    assert any("1.50x" in texts for texts in panels)


@pytest.mark.parametrize("metric", list(METRICS))
def test_a_running_sweep_with_a_crashed_and_a_queued_cell_answers_for_every_metric(client: TestClient, dataset, metric: str) -> None:
    worker = register_worker(client)
    sweep = _sweep(client, worker, sweep_body(dataset, repeats=1), ["crashed"])
    for view in (f"/matrix?sweep_id={sweep}&metric={metric}", f"/matrix?metric={metric}", f"/sweeps/{sweep}"):
        response = client.get(view)
        assert response.status_code == 200, (view, response.text[-2000:])
    assert 'id="sweep-state">running<' in response.text


def test_every_page_answers_while_jobs_are_in_every_state(client: TestClient, dataset) -> None:
    """A sweep with a baseline, two methods and two graph modes, two repeats: its 12 jobs succeeded, crashed, timed out,
    failed, running and queued in turn; then a second sweep of the build cancelled with one of each kind done."""
    worker = register_worker(client)
    body = sweep_body(dataset, baseline=True, graph_modes=["NONE", "PIECEWISE"])
    order = ["succeeded", "crashed", "timed_out", "failed", "running"] * 2
    first = _sweep(client, worker, body, order)
    views = _views(f"/sweeps/{first}", "/history?method=ngram&backend=CPU_ATTN&graph_mode=PIECEWISE")
    _no_missing_written(_all_answer(client, views))
    second = _sweep(client, worker, body, ["succeeded", "crashed", "running"])
    assert client.post(f"/api/v1/sweeps/{second}/cancel", headers=AUTH).status_code == 200
    pages = _all_answer(client, [*views, f"/sweeps/{second}", f"/compare?base={first}&head={second}",
                                 f"/compare?base={first}&head={second}&format=csv"])
    _no_missing_written(pages)
    assert 'id="sweep-state">cancelled<' in pages[f"/sweeps/{second}"]
    states = {s for _, cells in tables(pages[f"/sweeps/{second}"])["matrix"][1:] for s in cells[9].split(", ")}
    assert {s.split()[0] for s in states} == {"succeeded", "crashed", "cancelled"}


@pytest.mark.parametrize("finished", [
    [datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)],
    [datetime(1, 1, 1, tzinfo=UTC)],
    [datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)],
    [datetime(2026, 11, 30, 9, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC)],
    [datetime(2026, 11, 30, 9, tzinfo=UTC), datetime(2026, 11, 30, 9, 0, 0, 1, tzinfo=UTC)],
], ids=["9999", "year-1", "both-ends", "now-and-9999", "a-microsecond-apart"])
def test_history_answers_with_extreme_stored_finish_times(client: TestClient, dataset, db_url: str, finished: list[datetime]) -> None:
    """An imported ``exit.json`` once stored a cell as finished on 9999-12-31 (the import refuses such times now)."""
    worker = register_worker(client, builds=HISTORY_BUILDS[:2])
    for build in HISTORY_BUILDS[:2]:
        _sweep(client, worker, sweep_body(dataset, build=build, repeats=1, speculative=NGRAM), ["succeeded"])
    engine = db.make_engine(db_url)
    with engine.begin() as connection:
        for job_id, when in enumerate(finished * (2 // len(finished)), start=1):
            # As an imported exit.json gave both (a history places a build by its first start).
            connection.execute(update(Job).where(Job.id == job_id).values(started_at=when, finished_at=when))
            connection.execute(update(Result).where(Result.job_id == job_id).values(created_at=when))
    engine.dispose()
    pages = _all_answer(client, [f"/history?build={HISTORY_BUILDS[0]}", "/history", "/history?format=csv",
                                 f"/history?build={HISTORY_BUILDS[0]}&format=csv", "/matrix", "/fallback", "/compare"])
    points = [cells[2] for _, cells in tables(pages["/history"])["points"][1:]]
    assert sorted(points) == sorted(f"{w:%Y-%m-%d %H:%M} (first ran)" for w in finished * (2 // len(finished)))
    assert 'id="history-chart"' in pages["/history"]


@pytest.mark.parametrize("committed", [(datetime(1, 1, 2, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)),
                                       (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),) * 2])
def test_history_placed_by_extreme_commit_dates_answers(client: TestClient, dataset, committed: tuple[datetime, datetime]) -> None:
    # Registration refuses such dates now (app.schemas.times); a database written before may hold them.
    worker = register_worker(client, builds=HISTORY_BUILDS[:2])
    with client.app.state.sessionmaker.begin() as session:
        for build, when in zip(HISTORY_BUILDS[:2], committed, strict=True):
            session.execute(update(Build).where(Build.label == build).values(committed_at=when))
    for build in HISTORY_BUILDS[:2]:
        _sweep(client, worker, sweep_body(dataset, build=build, repeats=2, speculative=NGRAM), ["succeeded", "succeeded"])
    response = client.get("/history")
    assert response.status_code == 200, response.text[-2000:]
    assert [cells[2].split()[-1] for _, cells in tables(response.text)["points"][1:]] == ["(committed)"] * 2


@pytest.mark.parametrize("speeds", [[1.7976931348623157e308], [1e308, 1e308], [5e-324, 5e-324], [1e300, 1e-300],
                                    [1e308, 1.0], [0.0, 1.0]],
                         ids=["largest", "1e308", "smallest", "far-apart", "huge-and-one", "zero"])
def test_pages_answer_with_extreme_stored_speeds(client: TestClient, dataset, speeds: list[float]) -> None:
    worker = register_worker(client, builds=HISTORY_BUILDS[:2])
    sweeps = []
    for build in HISTORY_BUILDS[:2]:
        sweep = submit(client, sweep_body(dataset, build=build, repeats=len(speeds), baseline=True, speculative=NGRAM)).json()
        sweeps.append(sweep["id"])
        for i in range(2 * len(speeds)):
            job = claim(client, worker)
            assert complete(client, job["job_id"], worker, {"result": cell_result(), "exit_code": 0}).status_code == 200
            _stored_speed(client, job["job_id"], speeds[i % len(speeds)])
    pages = _all_answer(client, _views(*(f"/sweeps/{s}" for s in sweeps), f"/compare?base={sweeps[0]}&head={sweeps[1]}",
                                       "/history?method=ngram&backend=CPU_ATTN&graph_mode=NONE"))
    _no_missing_written(pages)


@pytest.mark.parametrize(("base", "head", "verdict"), [(1e7, 5e-324, "worse"), (5e-324, 1e7, "better"), (1e308, 1.0, "undecided")])
def test_compare_answers_between_speeds_whose_ratio_no_float_holds(client: TestClient, dataset, base: float, head: float,
                                                                   verdict: str) -> None:
    """1e7 (the ceiling on reports) against 5e-324 tokens/s: the ratio is 0 or infinite, which the verdict once took
    the logarithm of. A side beyond the ceiling (stored before it) is left out: nothing to call, never unchanged."""
    worker = register_worker(client, builds=HISTORY_BUILDS[:2])
    for build, speed in zip(HISTORY_BUILDS[:2], (base, head), strict=True):
        submit(client, sweep_body(dataset, build=build, repeats=2, speculative=NGRAM))
        for _ in range(2):
            job = claim(client, worker)
            assert complete(client, job["job_id"], worker, {"result": cell_result()}).status_code == 200
            _stored_speed(client, job["job_id"], speed)
    two_builds = f"/compare?base_build={HISTORY_BUILDS[0]}&head_build={HISTORY_BUILDS[1]}"
    pages = _all_answer(client, ["/compare", "/compare?format=csv", two_builds])
    [(_, cells)] = tables(pages["/compare"])["changes"][1:]
    assert cells[0] == verdict
