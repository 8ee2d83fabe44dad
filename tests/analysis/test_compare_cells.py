"""The compare view's verdicts, one rule each."""

from app.analysis.alarms import Difference
from app.analysis.compare_cells import SEVERITY, Side, verdict
from app.analysis.fallback import Ratio
from app.enums import Verdict

OK, DOWN, DEAD = Side(ran=True, downgraded=False), Side(ran=True, downgraded=True), Side(ran=False, downgraded=False)
SAME = Ratio(1.0, 0.97, 1.03)


def test_crashes_come_before_any_number() -> None:
    assert verdict(OK, DEAD, speed=None, acceptance=None) is Verdict.NEWLY_CRASHING
    assert verdict(DEAD, OK, speed=None, acceptance=None) is Verdict.FIXED
    assert verdict(DEAD, DEAD, speed=None, acceptance=None) is Verdict.UNCHANGED


def test_a_new_downgrade_is_named_even_when_it_is_faster() -> None:
    assert verdict(OK, DOWN, speed=Ratio(1.2, 1.1, 1.3), acceptance=None) is Verdict.NOW_DOWNGRADED


def test_speed_needs_its_whole_interval_past_five_per_cent() -> None:
    assert verdict(OK, OK, speed=Ratio(0.8, 0.75, 0.85), acceptance=None) is Verdict.WORSE
    assert verdict(OK, OK, speed=Ratio(1.2, 1.1, 1.3), acceptance=None) is Verdict.BETTER
    assert verdict(OK, OK, speed=Ratio(0.9, 0.8, 0.97), acceptance=None) is Verdict.UNCHANGED
    assert verdict(OK, OK, speed=Ratio(0.5, None, None), acceptance=None) is Verdict.UNCHANGED


def test_accepting_less_is_worse_even_when_faster() -> None:
    dropped = Difference(-0.09, -0.11, -0.07)
    assert verdict(OK, OK, speed=Ratio(1.2, 1.1, 1.3), acceptance=dropped) is Verdict.WORSE
    assert verdict(OK, OK, speed=SAME, acceptance=Difference(0.09, 0.07, 0.11)) is Verdict.BETTER


def test_worst_verdicts_sort_first() -> None:
    assert sorted(Verdict, key=SEVERITY.__getitem__)[:2] == [Verdict.NEWLY_CRASHING, Verdict.WORSE]
