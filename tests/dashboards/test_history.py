"""``/history``'s bisections: each step's build, its call against the good and bad builds, and its evidence."""

import re
from pathlib import Path

from fastapi.testclient import TestClient

from tests.conftest import AUTH
from tests.factories import register_worker, run_cell

SERIES = ["h0", "h1", "h2", "h3"]


def test_history_shows_a_bisection_with_each_steps_call_and_evidence(client: TestClient, dataset: Path) -> None:
    worker = register_worker(client, builds=SERIES)
    bisection = client.post("/api/v1/bisections", json={"name": "ngram-check", "series": SERIES, "good": "h0", "bad": "h3"},
                            headers=AUTH).json()
    good = run_cell(client, worker, dataset, "h0", [100.0, 101.0])
    # h2 on accepts 5 of 60 draft tokens where h0 and h1 accept 30.
    for build, accepted in (("h3", 5), ("h1", 30), ("h2", 5)):
        sweep = run_cell(client, worker, dataset, build, [100.0, 101.0], accepted=accepted)
        answer = client.post(f"/api/v1/bisections/{bisection['id']}/steps", json={"sweep_id": sweep, "against_sweep_id": good},
                             headers=AUTH)
        assert answer.status_code == 201, answer.text
    html = client.get("/history").text
    section = html.split('id="bisections"')[1]
    assert f'id="bisection-{bisection["id"]}"' in section and "first bad build <strong>h2</strong> (last good h1)" in section
    assert "Looked for: cpu ngram k=3 CPU_ATTN NONE acceptance worse." in section
    rows = section.split("<tr")[2:]
    # Round 1 against the good build; later rounds against it and against the bad build.
    assert [r.split("<td>")[1:4] + r.split("<td>")[5:6] for r in rows] == [
        ["1</td>", "h3</td>", "bad</td>", "good (h0)</td>"],
        ["2</td>", "h1</td>", "good</td>", "good (h0)</td>"], ["2</td>", "h1</td>", "good</td>", "bad (h3)</td>"],
        ["3</td>", "h2</td>", "bad</td>", "good (h0)</td>"], ["3</td>", "h2</td>", "bad</td>", "bad (h3)</td>"]]
    # 10 of 120 against 60 of 120 accepted: -41.7 points with its interval; tokens/s 1.00x, 2 starts a side.
    # The cells' text, as read: an interval's bracket sits in a span of its own (it never breaks across lines).
    text = [re.sub(r"<[^>]+>", "", row) for row in rows]
    assert "-41.7 [" in text[3] and "1.00 [" in text[3] and "<td>2, 2</td>" in rows[3]
    assert "+41.7 points" in text[2] and "41.7 [" in text[2]
    assert f'href="/sweeps/{good}"' in rows[0]


def test_history_without_bisections_shows_no_section(client: TestClient) -> None:
    assert 'id="bisections"' not in client.get("/history").text
