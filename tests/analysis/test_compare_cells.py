"""The compare table's verdicts: what ran decides first, then the numbers' verdict (``verdicts.cell_verdict``)."""

from app.analysis.compare_cells import SEVERITY, Side, verdict
from app.analysis.verdicts import CellSample, cell_verdict
from app.enums import Verdict

OK, DOWN, DEAD = Side(ran=True, downgraded=False), Side(ran=True, downgraded=True), Side(ran=False, downgraded=False, died=True)
QUEUED = Side(ran=False, downgraded=False)
EAGER = Side(ran=True, downgraded=False, draft_eager=True)
EIGHT = [100.0 + i for i in range(8)]
SAME = cell_verdict(CellSample(EIGHT), CellSample(EIGHT))
FASTER = cell_verdict(CellSample(EIGHT), CellSample([v * 1.2 for v in EIGHT]))
SLOWER = cell_verdict(CellSample(EIGHT), CellSample([v * 0.8 for v in EIGHT]))


def test_crashes_come_before_any_number() -> None:
    assert verdict(OK, DEAD, None) is Verdict.NEWLY_CRASHING
    assert verdict(DEAD, OK, None) is Verdict.FIXED
    assert verdict(DEAD, DEAD, None) is Verdict.UNCHANGED


def test_a_side_with_nothing_finished_is_pending_not_a_crash() -> None:
    # Seen on the H200: an A/A head whose one job was still running was called newly crashing.
    assert verdict(OK, QUEUED, None) is Verdict.PENDING
    assert verdict(QUEUED, OK, None) is Verdict.PENDING
    assert verdict(DEAD, QUEUED, None) is Verdict.PENDING
    assert verdict(QUEUED, QUEUED, None) is Verdict.PENDING


def test_a_new_downgrade_or_eager_draft_is_named_even_when_it_is_faster() -> None:
    assert verdict(OK, DOWN, FASTER) is Verdict.NOW_DOWNGRADED
    assert verdict(OK, EAGER, FASTER) is Verdict.NOW_EAGER_DRAFT
    assert verdict(EAGER, EAGER, SAME) is Verdict.UNCHANGED


def test_the_numbers_are_the_statistics_verdict() -> None:
    assert (verdict(OK, OK, SLOWER), verdict(OK, OK, FASTER), verdict(OK, OK, SAME)) == (
        Verdict.WORSE, Verdict.BETTER, Verdict.UNCHANGED)
    one_start_each = cell_verdict(CellSample([100.0]), CellSample([70.0]))
    assert verdict(OK, OK, one_start_each) is Verdict.UNDECIDED


def test_two_cells_that_ran_without_numbers_to_compare_are_undecided_not_unchanged() -> None:
    # Both ran, but one side's every tokens/s was left out (stored beyond what a GPU does).
    assert verdict(OK, OK, None) is Verdict.UNDECIDED


def test_worst_verdicts_sort_first() -> None:
    assert sorted(Verdict, key=SEVERITY.__getitem__)[:2] == [Verdict.NEWLY_CRASHING, Verdict.WORSE]
