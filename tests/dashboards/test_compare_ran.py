"""``/compare`` of the real H200 paired sweeps (``tests/data/h200-2026-12-03/proof22``): what ran is marked beside the
graph mode asked, in ``/matrix``'s words, and a fallback's row is red, the colour of a fallback on every page."""

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.comparisons.test_h200_proof22 import PROOF22
from tests.dashboards.h200 import imported_folder, in_process


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    url = f"sqlite:///{tmp_path_factory.mktemp('compare-ran') / 'store.db'}"
    for name in ("aa-small", "aa-small-again", "eager-base", "eager-head"):
        imported_folder(url, PROOF22 / f"h200-proof22-{name}")
    yield from in_process(url)


def _page(client: TestClient, base: str, head: str) -> str:
    ids = {s["name"]: s["id"] for s in client.get("/api/v1/sweeps").json()}
    answer = client.get("/compare", params={"base": ids[f"h200-proof22-{base}"], "head": ids[f"h200-proof22-{head}"]})
    assert answer.status_code == 200, answer.text
    return answer.text


def _rows(html: str) -> list[str]:
    table = html.split('<table id="changes">', 1)[1].split("</table>", 1)[0]
    return table.split("<tr")[2:]


def test_an_eager_draft_is_marked_in_the_head_and_its_row_is_a_fallbacks(store: TestClient) -> None:
    html = _page(store, "eager-base", "eager-head")
    [row] = _rows(html)
    assert row.startswith(' class="fallback"')
    ran = re.search(r'<td class="ran">(.*?)</td>', row, re.S).group(1)
    base, head = ran.split(" → ")
    assert 'class="badge eager"' not in base and ">draft eager</span>" in head
    assert "1 common cell: " in html and "-0.000" not in html


def test_a_downgrade_is_marked_beside_the_mode_that_ran(store: TestClient) -> None:
    # FLASHINFER's draft cell asks FULL_AND_PIECEWISE and runs PIECEWISE; its head was still running (pending).
    html = _page(store, "aa-small", "aa-small-again")
    [row] = [r for r in _rows(html) if "FLASHINFER" in r and "draft_" in r]
    assert row.count(">downgraded</span>") == 1 and "not finished" in row  # the head ran nothing yet: no mark
    assert 'title="asked FULL_AND_PIECEWISE; vLLM ran PIECEWISE"' in row
