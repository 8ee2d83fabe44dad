"""More starts where they are needed (app.ci.looks), on hand-computed cases: which cells are decided, how many more
pairs a cell gets, how a budget is shared, and the comparison the looks add up to; and how the comment says it."""

from dataclasses import replace

import pytest

from app.ci import looks
from app.ci.comment import render
from app.ci.looks import Looks
from app.enums import Verdict
from app.schemas.compare import SpeedCall
from tests.ci.test_comment import CONTEXT, _cell, _comparison


def _call(change: str = "unchanged", *, ratio: float = 1.0, detectable: float | None = 0.08, pairs: int = 4,
          base_starts: int | None = None, head_starts: int | None = None) -> SpeedCall:
    return SpeedCall(change=change, rule="paired" if pairs else "noise_model", ratio=ratio, low=ratio * 0.95,
                     high=ratio * 1.05, confidence=0.95, detectable=detectable, base_starts=base_starts or pairs,
                     head_starts=head_starts or pairs, pairs=pairs, sentence="said")


@pytest.mark.parametrize(("call", "mde", "decided"), [
    (_call("worse", ratio=0.7), 0.05, True),
    (_call("better", ratio=1.3), 0.05, True),
    (_call(detectable=0.05), 0.05, True),  # unchanged, and 5 % was in reach
    (_call(detectable=0.0501), 0.05, False),
    (_call(detectable=0.5), None, True),  # without --mde any unchanged is decided
    (_call(detectable=None), 0.05, False),  # no model: nothing says what these starts could find
    (_call("undecided", ratio=0.9), None, False),
])
def test_a_cell_is_decided_when_called_or_unchanged_within_the_mde(call: SpeedCall, mde: float | None, decided: bool) -> None:
    assert looks.decided(call, mde) is decided


def test_an_unchanged_cell_gets_the_pairs_that_bring_its_mde_to_the_target_at_most_doubling() -> None:
    # n = 4, d = 8 %, target 5 %: 4 (ln 1.08 / ln 1.05)^2 = 4 x 2.4881 = 9.95 -> 10 pairs, 6 more; doubling caps at 4.
    assert looks.pairs_wanted(_call(detectable=0.08, pairs=4), 0.05) == 4
    # n = 10, d = 6 %: 10 (ln 1.06 / ln 1.05)^2 = 10 x 1.4263 = 14.26 -> 15 pairs: 5 more.
    assert looks.pairs_wanted(_call(detectable=0.06, pairs=10), 0.05) == 5


def test_an_undecided_cell_is_sized_on_the_change_it_shows_when_that_is_larger_than_the_mde() -> None:
    # 0.80x seen, d = 30 %, n = 8: target 20 %, 8 (ln 1.3 / ln 1.2)^2 = 8 x 2.0708 = 16.57 -> 17 pairs: 9 more, capped at 8.
    assert looks.pairs_wanted(_call("undecided", ratio=0.8, detectable=0.3, pairs=8), 0.05) == 8
    # d = 22 %: 8 (ln 1.22 / ln 1.2)^2 = 8 x 1.1895 = 9.52 -> 10 pairs: 2 more.
    assert looks.pairs_wanted(_call("undecided", ratio=0.8, detectable=0.22, pairs=8), 0.05) == 2
    # A change smaller than the mde is sized on the mde: 0.98x, d = 7 %, n = 8, target 5 %: 8 x 1.9231 = 15.38 -> 16
    # pairs: 8 more.
    assert looks.pairs_wanted(_call("undecided", ratio=0.98, detectable=0.07, pairs=8), 0.05) == 8


def test_without_a_noise_model_a_cell_doubles_its_pairs_and_unpaired_starts_count_as_pairs() -> None:
    assert looks.pairs_wanted(_call("undecided", ratio=0.9, detectable=None, pairs=3), 0.05) == 3
    unpaired = _call("undecided", ratio=0.9, detectable=None, base_starts=5, head_starts=2, pairs=0)
    assert looks.pairs_wanted(unpaired, 0.05) == 2
    assert looks.pairs_wanted(_call(detectable=0.9, pairs=400), 0.01) == looks.MAX_PAIRS


def test_a_budget_too_small_for_every_want_goes_to_each_cell_in_turn() -> None:
    # 10 s left, 2 s a pair: 5 pairs, dealt 0, 3, 7, 0, 3 (cell 7 wants one only).
    assert looks.plan({0: 4, 3: 2, 7: 1}, left_s=10.0, pair_s=2.0) == {0: 2, 3: 2, 7: 1}
    assert looks.plan({0: 4, 3: 2}, left_s=100.0, pair_s=2.0) == {0: 4, 3: 2}
    assert looks.plan({0: 4}, left_s=1.9, pair_s=2.0) == {}


def test_the_looks_add_up_to_each_cell_as_the_look_that_decided_it_saw_it() -> None:
    early = {"verdict": "worse", "head": {"job_ids": [3, 4]}, "speed_ratio": {"value": 0.7}}
    later = {"verdict": "undecided", "head": {"job_ids": [3, 4]}, "speed_ratio": {"value": 0.8}}
    other = {"verdict": "unchanged", "head": {"job_ids": [5, 6, 9]}, "speed_ratio": {"value": 1.0}}
    last = {"changes": [other, later], "counts": {"unchanged": 1, "undecided": 1}, "base_sweep": 1}
    settled = looks.settled(last, [early])
    assert settled["changes"] == [early, other] and settled["counts"] == {"worse": 1, "unchanged": 1}
    assert settled["base_sweep"] == 1


def test_the_comment_names_each_cell_left_open_and_what_the_looks_spent() -> None:
    open_cell = _cell("FLASHINFER", "FULL", Verdict.UNCHANGED, speed=(0.97, 0.91, 1.03))
    open_cell.head.job_ids = [11, 12]
    done = _cell("FLASH_ATTN", "FULL", Verdict.UNCHANGED)
    done.head.job_ids = [13, 14]
    spent = Looks(count=3, used_s=852.0, budget_s=1200.0, stopped="the budget ran out", mde=0.05,
                  left={(11, 12): _call(ratio=0.97, detectable=0.08, pairs=6)})
    markdown = render(_comparison([open_cell, done]), replace(CONTEXT, looks=spent))
    section = markdown.split("#### Still open after more starts\n")[1].split("\n\n")[0]
    assert section == ("- FLASHINFER FULL (dflash k=3, H200): unchanged, 0.97x [0.92, 1.02] after 6 pairs, but could "
                       "detect only 8.0 % (5.0 % asked): the budget ran out")
    assert "More starts: used 14.2 of 20 GPU minutes in 3 looks; the budget ran out." in markdown
    undecided = Looks(count=1, used_s=60.0, budget_s=60.0, stopped="the budget ran out", mde=None,
                      left={(11, 12): _call("undecided", ratio=0.9, detectable=None, base_starts=2, head_starts=3,
                                            pairs=0).model_copy(update={"low": None, "high": None})})
    markdown = render(_comparison([open_cell]), replace(CONTEXT, looks=undecided))
    assert ("undecided, 0.90x after 2 and 3 starts (no noise model to size what they could find): the budget ran out"
            in markdown and "used 1.0 of 1 GPU minutes in 1 look;" in markdown)
