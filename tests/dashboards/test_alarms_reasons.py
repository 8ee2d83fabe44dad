"""``/alarms`` tells a reader, of the cells the stored judgement did not flag, which were within the interval of their
eager sibling and which moved beyond it by less than the minimum effect, each with its numbers: at the default 2 points
the page once said "not flagged (within the interval, or less than 2 points from it)" of both."""

import re
from pathlib import Path

from fastapi.testclient import TestClient

from tests.alarms.pairs import graphed_pair


def _text(html: str) -> str:
    """What a reader sees of a page: its text, tags out, whitespace folded."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace(" ,", ",")


def _rows(html: str) -> list[str]:
    """The rows of the table of cells not flagged, as text."""
    table = html[html.index('id="spared-table"'):].split("</table>")[0]
    return [_text("<tr" + row).strip() for row in table.split("<tr")[2:]]


def test_the_stored_judgement_counts_and_lists_cells_within_the_interval_apart_from_those_below_the_minimum_effect(
        client: TestClient, dataset: Path) -> None:
    # tests/alarms/test_reasons.py computes each by hand: -10.0 [-11.8, -8.2] flagged; -0.8 [-1.1, -0.6] excludes 0 but is
    # under 2 points; +0.2 [-1.6, +2.0] holds 0.
    graphed_pair(client, dataset, "b-bug", {"NONE": 3000, "PIECEWISE": 2400})
    graphed_pair(client, dataset, "b-near", {"NONE": 6000, "PIECEWISE": 5950})
    graphed_pair(client, dataset, "b-held", {"NONE": 3000, "PIECEWISE": 3010})
    html = client.get("/alarms").text
    text = _text(html)
    assert "3 graphed cells with drafts in every stored build: 1 alarmed, 1 within the interval of their eager sibling, " \
           "1 below the minimum effect (their interval excludes 0, but they moved less than 2 points), 0 cannot show" in text
    assert "not flagged (within the interval" not in text
    assert _rows(html) == [
        "below the minimum effect cpu ngram k=3 CPU_ATTN PIECEWISE -0.8 [-1.1, -0.6] points of acceptance 2 points b-near",
        "within the interval cpu ngram k=3 CPU_ATTN PIECEWISE 0.2 [-1.6, 2.0] points of acceptance 2 points b-held",
    ]


def test_a_page_without_cells_not_flagged_lists_none(client: TestClient, dataset: Path) -> None:
    graphed_pair(client, dataset, "b-bug", {"NONE": 3000, "PIECEWISE": 2400})
    html = client.get("/alarms").text
    assert "1 alarmed, 0 within the interval of their eager sibling, 0 cannot show" in _text(html)
    assert 'id="spared-table"' not in html
