"""``/history``'s bisections in headless Chromium with JavaScript off, over a bisection stored through the service's
API (builds h0 to h3, acceptance dropping at h2, cells reported through the worker protocol): what a reader must see."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from tests.conftest import AUTH, TOKEN
from tests.factories import register_worker, run_cell
from tests.live import serve

DATASET = Path(__file__).resolve().parents[2] / "runners" / "prompts" / "draftbench.jsonl"
SERIES = ["h0", "h1", "h2", "h3"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, dict[str, int]]]:
    """Served: a bisection of SERIES (good h0, bad h3) whose steps ran h3, h1 and h2, where h2 on accepts 5 of 60 draft
    tokens and h0 and h1 accept 30. Yields the address, the bisection's id and each build's sweep."""
    url = f"sqlite:///{tmp_path_factory.mktemp('bisect') / 'bisect.db'}"
    with serve(Settings(database_url=url, token=TOKEN)) as base, httpx.Client(base_url=base, timeout=30) as http:
        worker = register_worker(http, builds=SERIES)
        made = http.post("/api/v1/bisections", json={"name": "ngram-check", "series": SERIES, "good": "h0", "bad": "h3"},
                         headers=AUTH)
        assert made.status_code == 201, made.text
        bisection = made.json()["id"]
        sweeps = {"h0": run_cell(http, worker, DATASET, "h0", [100.0, 101.0])}
        for build, accepted in (("h3", 5), ("h1", 30), ("h2", 5)):
            sweeps[build] = run_cell(http, worker, DATASET, build, [100.0, 101.0], accepted=accepted)
            step = http.post(f"/api/v1/bisections/{bisection}/steps",
                             json={"sweep_id": sweeps[build], "against_sweep_id": sweeps["h0"]}, headers=AUTH)
            assert step.status_code == 201, step.text
        yield base, bisection, sweeps


def _rows(page, bisection: int) -> list[list[str]]:
    table = page.locator(f"#bisection-{bisection} + p + table.bisection")
    return [row.locator("td").all_inner_texts() for row in table.locator("tr").all()[1:]]


def test_the_history_page_names_the_first_bad_build_and_each_rounds_call_with_its_evidence(site, page) -> None:
    base, bisection, _ = site
    page.goto(f"{base}/history")
    heading = page.locator(f"#bisection-{bisection}")
    assert heading.is_visible()
    assert " ".join(heading.inner_text().split()) == "Bisection 1: ngram-check · first bad build h2 (last good h1)"
    assert heading.locator("strong").inner_text() == "h2"
    series = " ".join(page.locator(f"#bisection-{bisection} + p").inner_text().split())
    assert series == ("Series (4 builds, oldest first): h0, h1, h2, h3; good h0, bad h3. "
                      "Looked for: cpu ngram k=3 CPU_ATTN NONE acceptance worse.")
    rows = _rows(page, bisection)
    # Round 1: the bad build against the good one; rounds 2 and 3: the midpoint against both.
    assert [r[:6] for r in rows] == [
        ["1", "h3", "bad", "cpu ngram k=3 CPU_ATTN NONE", "good (h0)", "worse"],
        ["2", "h1", "good", "cpu ngram k=3 CPU_ATTN NONE", "good (h0)", "unchanged"],
        ["2", "h1", "good", "cpu ngram k=3 CPU_ATTN NONE", "bad (h3)", "better"],
        ["3", "h2", "bad", "cpu ngram k=3 CPU_ATTN NONE", "good (h0)", "worse"],
        ["3", "h2", "bad", "cpu ngram k=3 CPU_ATTN NONE", "bad (h3)", "unchanged"],
    ]
    # The evidence: 10 of 120 draft tokens accepted against 60 of 120 is -41.7 points with its interval, tokens/s
    # unchanged (1.00x), two engine starts a side, and the reason in words where a metric moved.
    worse = rows[3]
    assert worse[6].startswith("1.00 [") and worse[7].startswith("-41.7 [") and worse[8] == "2, 2"
    assert worse[9].startswith("acceptance 50.0% -> 8.3%: -41.7 points [")
    assert rows[2][9].startswith("acceptance 8.3% -> 50.0%: +41.7 points [") and rows[1][9] == rows[4][9] == ""
    # Each step's calls are marked: the bad ones' rows stand out.
    table = page.locator(f"#bisection-{bisection} + p + table.bisection")
    assert [("alarm" in (r.get_attribute("class") or "")) for r in table.locator("tr").all()[1:]] == [
        True, False, False, True, True]


def test_each_rounds_runs_link_to_the_sweeps_it_compared(site, page) -> None:
    base, bisection, sweeps = site
    page.goto(f"{base}/history")
    rows = _rows(page, bisection)
    assert [r[10] for r in rows] == [
        f"sweep {sweeps['h3']} against {sweeps['h0']}",
        f"sweep {sweeps['h1']} against {sweeps['h0']}", f"sweep {sweeps['h1']} against {sweeps['h3']}",
        f"sweep {sweeps['h2']} against {sweeps['h0']}", f"sweep {sweeps['h2']} against {sweeps['h3']}",
    ]
    table = page.locator(f"#bisection-{bisection} + p + table.bisection")
    table.locator("tr").nth(3).get_by_role("link", name=str(sweeps["h3"]), exact=True).click()
    assert page.url.endswith(f"/sweeps/{sweeps['h3']}")
