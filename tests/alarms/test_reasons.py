"""What decided the alarm on each graphed cell, by hand: a cell within the interval, one outside it but below the
2-point minimum effect, one raised; and the lossless share deciding when it dropped nearer to an alarm."""

import pytest

from app.alarms import service as alarms
from app.enums import AlarmKind, CheckOutcome, CheckReason
from tests.alarms.pairs import pooled_cell

# Each pair of 6000 draft tokens a side (graphed, eager), with Wilson's 95 % intervals (z = 1.959964) and Newcombe's
# difference ``low = d - hypot(p1 - l1, u2 - p2)``, ``high = d + hypot(u1 - p1, p2 - l2)``:
# within:  3010 against 3000: [0.489018, 0.514313] and [0.487353, 0.512647]; d = +0.001667,
#          low = 0.001667 - hypot(0.012648, 0.012647) = -0.016220, high = 0.001667 + hypot(0.012646, 0.012647) = +0.019552.
# below:   5950 against 6000: [0.989031, 0.993673] and [0.999360, 1]; d = -0.008333,
#          low = -0.008333 - hypot(0.002636, 0) = -0.010969, high = -0.008333 + hypot(0.002006, 0.000640) = -0.006227:
#          0 excluded, 0.8 points under the 2-point minimum effect.
# raised:  2400 against 3000: [0.387672, 0.412456] and [0.487353, 0.512647]; d = -0.1,
#          low = -0.1 - hypot(0.012328, 0.012647) = -0.117662, high = -0.1 + hypot(0.012456, 0.012647) = -0.082249.
PAIRS = {"within": (3010, 3000), "below": (5950, 6000), "raised": (2400, 3000)}
HAND = {"within": (0.001667, -0.016220, 0.019552), "below": (-0.008333, -0.010969, -0.006227),
        "raised": (-0.1, -0.117662, -0.082249)}


def _cells(*names: str) -> list:
    """The eager and graphed cell of each pair of ``PAIRS`` named, its name their variant."""
    return [one for name in names for one in (pooled_cell("NONE", "ngram", PAIRS[name][1], 6000, variant=name),
                                              pooled_cell("FULL", "ngram", PAIRS[name][0], 6000, variant=name))]


def _judged() -> dict[str, alarms.Check]:
    return {c.variant: c for c in alarms.judge(_cells(*PAIRS)).checks}


def test_each_check_keeps_its_difference_and_interval_as_computed_by_hand() -> None:
    for name, check in _judged().items():
        d = check.difference
        assert (d.value, d.low, d.high) == pytest.approx(HAND[name], abs=1e-6), name
        assert (check.kind, check.min_effect) == (AlarmKind.ACCEPTANCE, 0.02)


def test_a_cell_inside_its_interval_one_outside_it_below_two_points_and_one_raised() -> None:
    judged = _judged()
    assert {name: (c.outcome, c.reason) for name, c in judged.items()} == {
        "within": (CheckOutcome.WITHIN, CheckReason.WITHIN_INTERVAL),
        "below": (CheckOutcome.WITHIN, CheckReason.BELOW_MIN_EFFECT),
        "raised": (CheckOutcome.ALARM, CheckReason.RAISED),
    }
    assert judged["below"].sentence == (
        "FLASH_ATTN FULL (ngram, b1): below the minimum effect (the interval excludes 0, the difference is smaller): "
        "acceptance -0.8 points [-1.1, -0.6] against its eager sibling, minimum effect 2 points")
    assert judged["within"].sentence.endswith("within the interval (it includes 0): acceptance +0.2 points [-1.6, +2.0] "
                                              "against its eager sibling, minimum effect 2 points")


def test_the_cells_within_are_counted_and_listed_by_what_spared_them_nearest_to_an_alarm_first() -> None:
    judgement = alarms.judge(_cells(*PAIRS))
    assert {r: judgement.count_reason(r) for r in CheckReason} == {
        CheckReason.RAISED: 0, CheckReason.BELOW_MIN_EFFECT: 1, CheckReason.WITHIN_INTERVAL: 1, CheckReason.UNKNOWN: 0}
    assert [c.variant for c in judgement.spared] == ["below", "within"]


def test_at_a_minimum_effect_under_its_difference_the_cell_below_two_points_is_raised() -> None:
    # 0.8 points at a 0.5-point minimum effect: the same interval, now an alarm; the one within stays within.
    found = {c.variant: c.reason for c in alarms.judge(_cells("within", "below"), min_effect=0.005).checks}
    assert found == {"within": CheckReason.WITHIN_INTERVAL, "below": CheckReason.RAISED}


def test_a_lossless_share_that_dropped_a_little_decides_a_cell_whose_acceptance_held() -> None:
    # Acceptance 3010 against 3000 (within); lossless 58000 of 60000 against 59000: d = -0.016667 [-0.018438, -0.014908],
    # 0 excluded and under 2 points. A lossless share that rose is no sign of a bug: acceptance decides then.
    eager, graphed = pooled_cell("NONE", "ngram", 3000, 6000), pooled_cell("FULL", "ngram", 3010, 6000)
    eager.lossless_same, eager.lossless_total = 59000, 60000
    graphed.lossless_same, graphed.lossless_total = 58000, 60000
    [check] = alarms.judge([eager, graphed]).checks
    assert (check.outcome, check.reason, check.kind) == (CheckOutcome.WITHIN, CheckReason.BELOW_MIN_EFFECT, AlarmKind.LOSSLESS)
    assert (check.difference.value, check.difference.low, check.difference.high) == pytest.approx(
        (-0.016667, -0.018438, -0.014908), abs=1e-6)
    graphed.lossless_same = 59500
    [check] = alarms.judge([eager, graphed]).checks
    assert (check.reason, check.kind) == (CheckReason.WITHIN_INTERVAL, AlarmKind.ACCEPTANCE)
