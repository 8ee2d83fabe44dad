"""A sweep's page, in headless Chromium with JavaScript off, names the result whose spec-decode counters break a rule,
with the rule in its words; a sweep whose counters agree says nothing of them."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from tests.conftest import TOKEN
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body
from tests.live import serve

DATASET = Path(__file__).resolve().parents[2] / "runners" / "prompts" / "draftbench.jsonl"
# Position 3 accepted more than position 2: 20 drafts of k=3, 30 accepted in all.
BROKEN = {"num_drafts": 20, "num_draft_tokens": 60, "num_accepted_tokens": 30, "accepted_per_position": [16, 6, 8]}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, int, int]]:
    """Served: a sweep whose draft_model result counted position 3 above position 2, and one whose counters agree.
    Yields the address, the broken sweep, its broken job and the sound sweep."""
    url = f"sqlite:///{tmp_path_factory.mktemp('counters') / 'counters.db'}"
    with serve(Settings(database_url=url, token=TOKEN)) as base, httpx.Client(base_url=base, timeout=30) as http:
        worker = register_worker(http)
        broken_job, sweeps = 0, []
        for name, counters in (("broken-counters", BROKEN), ("sound-counters", cell_result()["spec_decode"])):
            sweep = submit(http, sweep_body(DATASET, name=name, repeats=1)).json()
            sweeps.append(sweep["id"])
            for job in (claim(http, worker), claim(http, worker)):
                body = cell_result()
                if job["spec"]["speculative"]["method"] == "draft_model":
                    body["spec_decode"] = counters
                    broken_job = broken_job or job["job_id"]
                assert complete(http, job["job_id"], worker, {"result": body, "exit_code": 0}).status_code == 200
        yield base, sweeps[0], broken_job, sweeps[1]


def test_a_result_whose_counters_break_a_rule_is_named_on_its_sweeps_page(site, page) -> None:
    base, broken, job, _ = site
    page.goto(f"{base}/sweeps/{broken}")
    assert page.locator("#counter-problems-count").inner_text() == (
        "1 result of this sweep has spec-decode counters that disagree with each other (a counting bug in vLLM, "
        "or in how they were read):")
    [item] = page.locator("#counter-problems li").all()
    assert item.is_visible()
    text = " ".join(item.inner_text().split())
    assert text == f"counters disagree job {job} (cpu CPU_ATTN NONE, draft_model k=3): position 3 accepted 8 > position 2's 6 · log"
    assert page.get_by_text("position 3 accepted 8 > position 2's 6").is_visible()


def test_a_sweep_whose_counters_agree_says_nothing_of_them(site, page) -> None:
    base, _, _, sound = site
    page.goto(f"{base}/sweeps/{sound}")
    assert page.locator("#counter-problems-count").count() == 0 and page.locator("#counter-problems").count() == 0
    assert "disagree" not in page.content()
