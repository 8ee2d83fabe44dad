"""The pull-request comment of the real H200 paired sweeps (``tests/data/h200-2026-12-03/proof22``, ``h200-2026-12-04``),
as `draftbench compare` renders it: what its author must read in it. Each number with its interval, the starts it
rests on and what they could detect; what ran where it is not what the cell asked; what would decide a cell too noisy
to call."""

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.ci import comment
from app.schemas.compare import Comparison
from tests.comparisons.test_h200_proof22 import NIGHT, PROOF22
from tests.dashboards.h200 import imported_folder, in_process


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    url = f"sqlite:///{tmp_path_factory.mktemp('comment') / 'comment.db'}"
    for folder in [*sorted(PROOF22.iterdir()), *sorted(f for f in NIGHT.iterdir() if f.is_dir())]:
        imported_folder(url, folder)
    yield from in_process(url)


def _comment(client: TestClient, base: str, head: str) -> str:
    """The comment of the sweeps named ``h200-proof22-BASE`` and ``-HEAD`` (the newest of a name, as imported last)."""
    ids = {s["name"]: s["id"] for s in reversed(client.get("/api/v1/sweeps").json())}
    answer = client.get("/api/v1/compare", params={"base_sweep": ids[f"h200-proof22-{base}"],
                                                    "head_sweep": ids[f"h200-proof22-{head}"]})
    assert answer.status_code == 200, answer.text
    return comment.render(Comparison.model_validate(answer.json()),
                          comment.Context(head_commit="unknown", base_commit="unknown", server="http://bench.local"))


def _row(body: str, backend: str, label: str) -> list[str]:
    [header] = [line for line in body.splitlines() if line.startswith("| verdict")]
    [row] = [line for line in body.splitlines() if line.startswith("| ") and f"| {label} | {backend} |" in line]
    return dict(zip(header.split(" | "), row.split(" | "), strict=True))


def test_a_regression_says_its_pairs_its_level_and_what_they_could_detect(store: TestClient) -> None:
    # The 9 ms drafting delay: base 3543, 3793, 3788 tok/s; head 2538, 2593, 2553, three pairs.
    body = _comment(store, "slow-base", "slow-head")
    assert ("- slower on FLASH_ATTN with FULL_AND_PIECEWISE (draft_model k=3, H200): 0.69x [0.65, 0.74] "
            "(3 pairs of starts, 95 %; could detect 8.9 % or more)") in body
    row = _row(body, "FLASH_ATTN", "draft_model k=3")
    assert row["head / base [95 %]"] == "0.69x [0.65, 0.74]" and row["could detect"] == "8.9 % (3 pairs of starts)"


def test_an_unchanged_cell_gives_its_interval_and_pairs_in_the_table(store: TestClient) -> None:
    # The A/A of three cells, two pairs each: nothing called, but each with what it rests on.
    row = _row(_comment(store, "aa-small", "aa-small-again"), "FLASHINFER", "baseline")
    assert row["| verdict"] == "| unchanged"
    assert row["head / base [95 %]"] == "1.01x [0.80, 1.28]" and row["could detect"].endswith(" % (2 pairs of starts)")


def test_a_cell_too_noisy_to_call_says_how_many_pairs_would_decide_it(store: TestClient) -> None:
    # FLASHINFER's A/A of the night: one pair of the baseline, 0.83x; read by the FLASHINFER baseline's paired spread
    # of this store (the proof's and the night's sweeps), that pair could detect 68 %; a 17 % change needs
    # ceil(1 x (ln(1 + d) / ln(1 + |0.83 - 1|))^2) = 12 pairs at the unrounded d and ratio (app.ci.looks.pairs_needed).
    body = _comment(store, "aa-fi", "aa-fi-again")
    assert ("1 cell moved by more than 5% but inside the noise of their starts (these starts could detect 68 %): about 12 "
            "pairs of starts would find a change the size of the one seen; see the table.") in body
    assert _row(body, "FLASHINFER", "baseline")["head / base [95 %]"] == "0.83x [0.56, 1.24]"


def test_the_table_says_what_ran_where_vllm_ran_another_mode_or_the_draft_eagerly(store: TestClient) -> None:
    # FLASHINFER's draft cell asks FULL_AND_PIECEWISE and runs PIECEWISE, its draft eager, on both sides.
    body = _comment(store, "aa-fi", "aa-fi-again")
    assert _row(body, "FLASHINFER", "draft_model k=3")["graph mode (what ran)"] == (
        "FULL_AND_PIECEWISE (ran PIECEWISE: downgraded; draft eager)")
    eager = _row(_comment(store, "eager-base", "eager-head"), "FLASH_ATTN", "dflash k=3")
    assert eager["graph mode (what ran)"] == "FULL_AND_PIECEWISE (draft eager in the head)"
    assert eager["Δ acceptance (points) [95 %]"] == "+0.0 [+0.0, +0.0]"  # never "-0.0"
