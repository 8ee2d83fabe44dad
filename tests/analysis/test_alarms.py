"""The graph-capture alarm's statistics, by hand, and the real capture bug of the H200 proof."""

import pytest

from app.analysis.alarms import Difference, decide, difference, is_degenerate
from app.enums import CheckReason


def test_newcombe_interval_by_hand() -> None:
    # Wilson 910/1000 = [0.890655, 0.926199]; 1000/1000 = [0.996173, 1].
    # low = -0.09 - sqrt(0.019345^2 + 0^2); high = -0.09 + sqrt(0.016199^2 + 0.003827^2)
    found = difference(910, 1000, 1000, 1000)
    assert found.value == pytest.approx(-0.09)
    assert found.low == pytest.approx(-0.109345, abs=1e-5) and found.high == pytest.approx(-0.073355, abs=1e-5)


def test_equal_proportions_give_an_interval_around_zero() -> None:
    found = difference(50, 100, 50, 100)
    assert found.value == 0 and found.low == pytest.approx(-found.high) and found.high > 0.1


def test_the_capture_bug_cell_is_flagged_against_its_eager_sibling() -> None:
    # capture-bug.sqlite: vllm-0.26.0-fi-full, FLASHINFER, draft_model. FULL_DECODE_ONLY accepted
    # 17852 of 19620 draft tokens; its NONE sibling 15360 of 15360.
    found = difference(17852, 19620, 15360, 15360)
    assert found.value == pytest.approx(0.9099 - 1.0, abs=1e-4)
    assert decide(found) is CheckReason.RAISED


def test_a_tiny_but_certain_wobble_is_not_an_alarm() -> None:
    # A million tokens each: 0.5 points apart is outside the interval and below the 2-point minimum.
    found = difference(500_000, 1_000_000, 505_000, 1_000_000)
    assert found.high < 0 and decide(found) is CheckReason.BELOW_MIN_EFFECT


def test_a_large_drop_on_few_tokens_is_not_an_alarm() -> None:
    assert decide(difference(8, 10, 10, 10)) is CheckReason.WITHIN_INTERVAL


def test_the_rule_reads_both_directions() -> None:
    assert decide(Difference(0.05, 0.03, 0.07)) is decide(Difference(-0.05, -0.07, -0.03)) is CheckReason.RAISED
    assert decide(Difference(0.05, -0.01, 0.11)) is CheckReason.WITHIN_INTERVAL


def test_random_and_identical_drafts_are_degenerate() -> None:
    assert is_degenerate(0, 15360) and is_degenerate(15360, 15360)
    assert not is_degenerate(17852, 19620) and not is_degenerate(0, 0)
