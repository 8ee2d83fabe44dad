"""``/api/v1/bisections``: a series validated, each step called by the service from the two sweeps' comparison."""

from pathlib import Path

from fastapi.testclient import TestClient

from tests.conftest import AUTH
from tests.factories import claim, register_worker, run_cell, submit, sweep_body

SERIES = [f"s{i}" for i in range(8)]
CELL = "cpu ngram k=3 CPU_ATTN NONE"


def _create(client: TestClient, **body) -> object:
    return client.post("/api/v1/bisections", json={"name": "ngram", "series": SERIES, "good": "s0", "bad": "s7"} | body,
                       headers=AUTH)


def _step(client: TestClient, bisection: int, sweep: int, against: int) -> object:
    return client.post(f"/api/v1/bisections/{bisection}/steps", json={"sweep_id": sweep, "against_sweep_id": against},
                       headers=AUTH)


def test_a_series_with_an_unknown_build_or_good_after_bad_is_refused_naming_it(client: TestClient) -> None:
    register_worker(client, builds=SERIES[:6])
    refused = _create(client)
    assert refused.status_code == 422
    [error] = refused.json()["detail"]
    assert error["loc"] == ["body", "series", 6] and "'s6' is not registered" in error["msg"]
    assert "allowed values: s0, s1, s2, s3, s4, s5" in error["msg"]
    register_worker(client, builds=SERIES)
    after = _create(client, good="s5", bad="s2").json()["detail"][0]
    assert after["loc"] == ["body", "bad"] and "comes before the good build 's5'" in after["msg"]
    outside = _create(client, good="main").json()["detail"][0]
    assert outside["loc"] == ["body", "good"] and "allowed values: s0, s1" in outside["msg"]
    twice = _create(client, series=["s0", "s1", "s0"], bad="s1").json()["detail"][0]
    assert twice["loc"] == ["body", "series", 2]
    assert client.post("/api/v1/bisections", json={"name": "x", "series": SERIES, "good": "s0", "bad": "s7"}).status_code == 401


def test_the_fifth_build_lowering_acceptance_is_found_in_three_steps_after_good_against_bad(client: TestClient,
                                                                                            dataset: Path) -> None:
    worker = register_worker(client, builds=SERIES)
    # 30 of 60 draft tokens accepted up to s3, 5 of 60 from s4 on; tokens/s the same everywhere.
    accepted = {label: 30 if i < 4 else 5 for i, label in enumerate(SERIES)}
    created = _create(client)
    assert created.status_code == 201, created.text
    bisection = created.json()
    assert (bisection["state"], bisection["next_build"], bisection["steps_left"], bisection["bad_sweep_id"]) == (
        "running", "s7", 4, None)
    good = run_cell(client, worker, dataset, "s0", [100.0, 101.0], accepted=accepted["s0"])
    ran = []
    while bisection["state"] == "running":
        build = bisection["next_build"]
        ran.append(build)
        sweep = run_cell(client, worker, dataset, build, [100.0, 101.0], accepted=accepted[build])
        answer = _step(client, bisection["id"], sweep, good)
        assert answer.status_code == 201, answer.text
        bisection = answer.json()
    assert ran == ["s7", "s3", "s5", "s4"]
    assert (bisection["state"], bisection["last_good"], bisection["first_bad"]) == ("found", "s3", "s4")
    assert bisection["symptoms"] == [f"{CELL}: acceptance worse"]
    assert [s["call"] for s in bisection["steps"]] == ["bad", "good", "bad", "bad"]
    # The last step against the good build (s0), then against the bad one (s7, which accepts as s4 does).
    evidence, versus_bad = bisection["steps"][-1]["evidence"]
    assert (evidence["cell"], evidence["against"], evidence["verdict"], evidence["acceptance_change"]) == (CELL, "good", "worse", "worse")
    assert (versus_bad["against"], versus_bad["verdict"], versus_bad["acceptance_change"]) == ("bad", "unchanged", "unchanged")
    assert [e["against"] for e in bisection["steps"][0]["evidence"]] == ["good"]
    # Each later step's rows against the bad build compare with s7's own sweep, the first step's.
    assert bisection["bad_sweep_id"] == bisection["steps"][0]["sweep_id"] != bisection["steps"][0]["against_sweep_id"]
    # 10 of 120 against 60 of 120: -41.7 points, its interval with it.
    difference = evidence["acceptance_difference"]
    assert round(difference["value"], 4) == round(10 / 120 - 60 / 120, 4)
    assert difference["low"] < difference["value"] < difference["high"] < 0
    assert (evidence["compared_starts"], evidence["starts"]) == (2, 2)
    assert client.get(f"/api/v1/bisections/{bisection['id']}").json() == bisection
    assert _step(client, bisection["id"], sweep, good).status_code == 409


def test_a_midpoint_too_close_to_call_against_good_is_good_when_clearly_faster_than_bad(client: TestClient,
                                                                                    dataset: Path) -> None:
    """One start a side and no noise model: 1.3x is undecided against the good build (inside the host's A/A spread),
    while the bad build's 0.1x is called from either side."""
    worker = register_worker(client, builds=SERIES)
    bisection = _create(client).json()
    good = run_cell(client, worker, dataset, "s0", [100.0])
    steps = [_step(client, bisection["id"], run_cell(client, worker, dataset, "s7", [10.0]), good).json()]
    steps.append(_step(client, bisection["id"], run_cell(client, worker, dataset, "s3", [130.0]), good).json())
    assert steps[0]["symptoms"] == [f"{CELL}: tokens/s worse"]
    versus_good, versus_bad = steps[1]["steps"][1]["evidence"]
    assert (versus_good["tokens_per_s_change"], versus_bad["tokens_per_s_change"]) == ("undecided", "better")
    assert round(versus_bad["speed_ratio"]["value"], 6) == 13.0
    assert (steps[1]["steps"][1]["call"], steps[1]["last_good"], steps[1]["next_build"]) == ("good", "s3", "s5")
    # Undecided both ways (0.32x the good build, 3.2x the bad one: inside 3.26x): it stops with the range it reached.
    stopped = _step(client, bisection["id"], run_cell(client, worker, dataset, "s5", [32.0]), good).json()
    assert (stopped["state"], stopped["last_good"], stopped["first_bad"], stopped["next_build"]) == ("undecided", "s3", "s7", None)
    assert stopped["steps"][-1]["call"] == "undecided"


def test_a_bad_build_like_the_good_one_stops_with_nothing_to_look_for(client: TestClient, dataset: Path) -> None:
    worker = register_worker(client, builds=SERIES)
    bisection = _create(client).json()
    good = run_cell(client, worker, dataset, "s0", [100.0, 101.0])
    answer = _step(client, bisection["id"], run_cell(client, worker, dataset, "s7", [100.0, 101.0]), good).json()
    assert (answer["state"], answer["next_build"], answer["symptoms"]) == ("no_change", None, [])
    assert answer["steps"][0]["call"] == "good"


def test_a_step_of_another_build_or_an_unfinished_sweep_is_refused(client: TestClient, dataset: Path) -> None:
    worker = register_worker(client, builds=SERIES)
    bisection = _create(client).json()["id"]
    good = run_cell(client, worker, dataset, "s0", [100.0, 101.0])
    wrong = run_cell(client, worker, dataset, "s3", [100.0, 101.0])
    refused = _step(client, bisection, wrong, good)
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "sweep_id"]
    assert "runs 's7' next" in refused.json()["detail"][0]["msg"]
    against = _step(client, bisection, wrong, wrong).json()["detail"][0]
    assert against["loc"] == ["body", "against_sweep_id"]
    body = sweep_body(dataset, build="s7", repeats=1, speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    queued = submit(client, body).json()["id"]
    claim(client, worker)
    assert _step(client, bisection, queued, good).status_code == 409
    assert _step(client, bisection, 10**6, good).status_code == 404
    assert client.get("/api/v1/bisections/999").status_code == 404
