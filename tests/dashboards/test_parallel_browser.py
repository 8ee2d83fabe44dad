"""``/matrix``'s tensor-parallel section in headless Chromium with JavaScript off, over cells reported through the
worker protocol (an n-gram cell at tensor_parallel_size 1, 2 and 4; the two-GPU cell accepts 12 of 60 draft tokens a
start against 30 on one GPU, the four-GPU cell crashed): what a reader must see."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from tests.conftest import TOKEN
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body, upload_log
from tests.live import serve

DATASET = Path(__file__).resolve().parents[2] / "runners" / "prompts" / "draftbench.jsonl"
REFUSED = ("Traceback (most recent call last):\n  File \"arg_utils.py\", line 1, in create_speculative_config\n"
           "ValueError: Total number of attention heads (4) must be divisible by tensor parallel size (8).\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('parallel') / 'parallel.db'}"
    with serve(Settings(database_url=url, token=TOKEN)) as base, httpx.Client(base_url=base, timeout=30) as http:
        worker = register_worker(http)
        body = sweep_body(DATASET, repeats=2, engine_args={"max_num_seqs": 8, "tensor_parallel_size": [1, 2, 4]},
                          speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
        sweep = submit(http, body)
        assert sweep.status_code == 201, sweep.text
        speeds, accepted = {1: [100.0, 108.0], 2: [150.0, 161.0]}, {1: 30, 2: 12}
        for _ in range(6):
            job = claim(http, worker)
            size = job["spec"]["engine_args"]["tensor_parallel_size"]
            if size == 4:
                upload_log(http, job["job_id"], worker, REFUSED)
                outcome = {"exit_code": 1}
            else:
                outcome = {"result": cell_result(tokens_per_s=speeds[size].pop(0), accepted=accepted[size])}
            assert complete(http, job["job_id"], worker, outcome).status_code == 200
        yield base, sweep.json()["id"]


def test_the_matrix_puts_the_two_gpu_cell_beside_one_gpu_and_marks_the_acceptance_that_moved(site, page) -> None:
    base, sweep = site
    page.goto(f"{base}/matrix?sweep_id={sweep}")
    heading = page.locator("#parallel")
    assert heading.is_visible() and heading.inner_text() == "Tensor-parallel cells against one GPU"
    rows = [row.locator("td").all_inner_texts() for row in page.locator("#parallel-cells tr").all()[1:]]
    two, four = rows
    # 24 of 120 against 60 of 120: -30 points, flagged; tokens/s medians 155.5 against 104.
    assert two[1:10] == ["ngram k=3 tensor_parallel_size=2", "CPU_ATTN", "NONE", "2, unset", "0.200", "0.500",
                         two[7], "differs", two[9]]
    assert two[7].startswith("-30.0 [") and two[9].startswith(f"{155.5 / 104:.2f}x [")
    assert page.locator("#parallel-cells tr.alarm .badge.alarm").inner_text() == "differs"
    # The four-GPU cell measured nothing: its crash kind, linked to its group, and no figure in its place.
    assert four[4:7] == ["4, unset", "", ""] and four[7] == "exception" and four[10] == "0 / 2"
    crash = page.locator("#parallel-cells tr").nth(2).locator("a.badge.crash")
    assert crash.inner_text() == "exception" and crash.get_attribute("href").startswith("/crashes/")
