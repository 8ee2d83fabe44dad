"""A cell's verdict, base build against head build: each rule on a hand-computed case, then properties."""

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.analysis.verdicts import (
    CellSample,
    Change,
    Threshold,
    cell_verdict,
    history_threshold,
    level_text,
    ratio_of_medians,
    throughput_change,
)
from app.schemas.cell import CellResult
from tests.samples import pooled

AA_RUNS = Path(__file__).resolve().parents[1] / "data" / "aa-cpu"
DEFAULT = Threshold(0.05, "default", 0)
LEARNED = Threshold(0.05, "history", 6)
# Tokens/s of five engine starts (each a repeat's median over its rounds).
FIVE_ROUNDS = [98.0, 99.0, 100.0, 101.0, 102.0]
EIGHT = [100.0 + i for i in range(8)]
QUIET_HISTORY = [100.0, 101.0, 99.0, 100.0, 101.0, 99.0]  # sd 0.894: a 4.5 % threshold


def test_ratio_of_medians_by_hand() -> None:
    # medians 90 / 100; interval [l_h / u_b, u_h / l_b] = [88 / 102, 92 / 98], at 0.9375 + 0.9375 - 1.
    found = ratio_of_medians(FIVE_ROUNDS, [88.0, 89.0, 90.0, 91.0, 92.0])
    assert found.ratio == pytest.approx(0.9)
    assert (found.low, found.high) == pytest.approx((88 / 102, 92 / 98))
    assert found.confidence == pytest.approx(0.875)


def test_one_round_a_side_has_a_ratio_without_an_interval() -> None:
    found = ratio_of_medians([100.0], [80.0])
    assert (found.ratio, found.low, found.high, found.confidence) == (0.8, None, None, None)


def test_ratio_refuses_a_base_without_throughput() -> None:
    with pytest.raises(ValueError, match="base tokens/s must be positive"):
        ratio_of_medians([0.0, 1.0], [1.0])


def test_history_threshold_by_hand() -> None:
    # mean 100, sample sd sqrt((0 + 4 + 4 + 1 + 1) / 4) = 1.5811388, so 5 x 1.5811388 / 100.
    found = history_threshold([100.0, 102.0, 98.0, 101.0, 99.0])
    assert (found.relative, found.source, found.points) == (pytest.approx(0.079056942), "history", 5)


def test_history_threshold_trims_an_outlying_run() -> None:
    # With 50 added: median 99.5, MAD 1.5, scale 2.2239; 50 lies 49.5 away, beyond 5 x 2.2239: left out.
    assert history_threshold([100.0, 102.0, 98.0, 101.0, 99.0, 50.0]) == history_threshold([100.0, 102.0, 98.0, 101.0, 99.0])


def test_history_threshold_looks_back_only_so_far() -> None:
    noisy_then_quiet = [50.0, 150.0] * 10 + [100.0, 101.0, 99.0, 100.0, 101.0, 99.0]
    assert history_threshold(noisy_then_quiet, lookback=6).relative == pytest.approx(5 * 0.894427191 / 100)


def test_short_history_gives_the_default() -> None:
    assert history_threshold([100.0, 101.0]) == Threshold(0.05, "default", 0)


def test_five_repeats_a_side_with_history_are_judged_by_the_ratio_and_its_interval() -> None:
    # 5 against 5 cannot reach p < 0.002 (2 / 252 at best): 0.9 < 1 - 0.05 and [0.86, 0.94] excludes 1.
    found = throughput_change(FIVE_ROUNDS, [88.0, 89.0, 90.0, 91.0, 92.0], threshold=LEARNED)
    assert (found.change, found.p_value) == (Change.WORSE, None)
    assert throughput_change(FIVE_ROUNDS, [96.0, 97.0, 98.0, 99.0, 100.0], threshold=LEARNED).change is Change.UNCHANGED


def test_five_repeats_a_side_without_history_are_not_called() -> None:
    found = throughput_change(FIVE_ROUNDS, [88.0, 89.0, 90.0, 91.0, 92.0], threshold=DEFAULT)
    assert (found.change, found.p_value) == (Change.UNDECIDED, None)
    assert throughput_change(FIVE_ROUNDS, [96.0, 97.0, 98.0, 99.0, 100.0], threshold=DEFAULT).change is Change.UNCHANGED


def test_an_engine_start_1_6x_faster_than_another_is_not_called_worse() -> None:
    # A/A on the shared CPU host: one start of a build ran 1.6x faster than the next; one repeat a side.
    assert throughput_change([1600.0], [1000.0], threshold=DEFAULT).change is Change.UNDECIDED
    assert throughput_change([1000.0], [1600.0], threshold=DEFAULT).change is Change.UNDECIDED


def test_a_drop_well_beyond_the_aa_spread_is_called_without_history() -> None:
    # 0.20x (a patch adding 20 ms per drafting step) lies beyond 1 / 2.2^1.5 = 0.306.
    assert throughput_change([1000.0], [200.0], threshold=DEFAULT).change is Change.WORSE
    assert throughput_change([1000.0], [3300.0], threshold=DEFAULT).change is Change.BETTER
    assert throughput_change([1000.0], [320.0], threshold=DEFAULT).change is Change.UNDECIDED


def test_stored_aa_runs_on_the_cpu_engine_flag_no_pair() -> None:
    # Six engine starts of one build (tests/data/aa-cpu): 737 to 1594 tok/s. Before engine starts were the
    # unit, 10 of the 15 pairs were flagged worse or better at the 5 % default.
    runs = [pooled([CellResult.model_validate_json(p.read_text())]) for p in sorted(AA_RUNS.glob("run-*.json"))]
    verdicts = [cell_verdict(a, b) for a, b in itertools.combinations(runs, 2)]
    assert len(verdicts) == 15
    assert [v.change for v in verdicts if v.change in (Change.WORSE, Change.BETTER)] == []


def test_eight_repeats_a_side_need_mann_whitney_too() -> None:
    # Every head repeat below every base repeat: U = 0, p = 2 / C(16, 8) = 2 / 12870.
    found = throughput_change(EIGHT, [90.0 + i for i in range(8)], threshold=DEFAULT)
    assert (found.change, found.p_value) == (Change.WORSE, pytest.approx(2 / 12870))


def test_a_ratio_beyond_the_threshold_is_not_a_change_when_the_rounds_overlap() -> None:
    # Medians 107 / 115 = 0.93, but the rounds interleave: Mann-Whitney p = 0.72.
    base = [80.0 + 10 * i for i in range(8)]
    found = throughput_change(base, [v - 8 for v in base], threshold=DEFAULT)
    assert found.ratio.ratio == pytest.approx(107 / 115)
    assert found.change is Change.UNCHANGED and found.p_value > 0.5


def _sample(rounds: list[float], accepted: int = 600, per_position: tuple[int, ...] = (250, 200, 150)) -> CellSample:
    return CellSample(tokens_per_s=rounds, drafts=300, draft_tokens=900, accepted_tokens=accepted,
                      accepted_per_position=per_position)


def test_lower_acceptance_is_worse_and_says_by_how_much() -> None:
    # 600/900 = 66.7 % against 450/900 = 50.0 %: -16.7 points.
    verdict = cell_verdict(_sample(FIVE_ROUNDS), _sample(FIVE_ROUNDS, 450, (200, 150, 100)))
    assert verdict.change is Change.WORSE
    assert verdict.reasons[0].startswith("acceptance 66.7% -> 50.0%: -16.7 points [")
    assert verdict.acceptance.flagged and verdict.throughput.change is Change.UNCHANGED


def test_slower_tokens_per_s_is_worse_with_its_ratio() -> None:
    verdict = cell_verdict(_sample(FIVE_ROUNDS), _sample([88.0, 89.0, 90.0, 91.0, 92.0]), history=QUIET_HISTORY)
    assert verdict.change is Change.WORSE
    assert verdict.reasons == ("tokens/s 0.90x [0.86, 0.94] (too few repeats for a test; history threshold 4.5%)",)


def test_a_slower_cell_without_repeats_or_history_says_so() -> None:
    verdict = cell_verdict(_sample(FIVE_ROUNDS), _sample([88.0, 89.0, 90.0, 91.0, 92.0]))
    assert verdict.change is Change.UNDECIDED
    assert verdict.reasons == ("tokens/s 0.90x [0.86, 0.94]: not enough repeats to call (no noise model for "
                               "its GPU kind, backend, graph mode and draft, fewer than 7 engine starts a side for "
                               "Mann-Whitney, no history)",)


def test_faster_but_accepting_less_is_worse_and_lists_the_regression_first() -> None:
    verdict = cell_verdict(_sample(FIVE_ROUNDS), _sample([120.0, 121.0, 122.0, 123.0, 124.0], 450, (200, 150, 100)))
    assert verdict.change is Change.WORSE
    assert verdict.reasons[0].startswith("acceptance") and verdict.reasons[-1].startswith("tokens/s 1.22x")


def test_faster_is_better() -> None:
    verdict = cell_verdict(_sample(EIGHT), _sample([v * 1.2 for v in EIGHT]))
    assert verdict.change is Change.BETTER


def test_one_position_alone_can_make_a_cell_worse() -> None:
    # The same 600 of 900 accepted both sides, but position 3 falls from 150 to 50 of 300 drafts
    # while positions 1 and 2 gain 50 each: the regression is listed first.
    verdict = cell_verdict(_sample(FIVE_ROUNDS), _sample(FIVE_ROUNDS, 600, (300, 250, 50)))
    assert verdict.change is Change.WORSE and not verdict.acceptance.flagged
    assert [r.split(" ")[1] for r in verdict.reasons] == ["3", "1", "2"]


def test_a_learned_threshold_forgives_a_noisy_cell() -> None:
    # 0.90x is beyond 5 %, but this cell's history swings by sd sqrt(178 / 5) = 5.97 around 100: threshold 29.8 %.
    history = [95.0, 105.0, 100.0, 92.0, 108.0, 100.0]
    verdict = cell_verdict(_sample(FIVE_ROUNDS), _sample([88.0, 89.0, 90.0, 91.0, 92.0]), history=history)
    assert verdict.change is Change.UNCHANGED
    assert verdict.throughput.threshold.source == "history"


def test_baseline_cells_are_judged_on_tokens_per_s_alone() -> None:
    verdict = cell_verdict(CellSample(FIVE_ROUNDS), CellSample(FIVE_ROUNDS))
    assert (verdict.change, verdict.acceptance, verdict.per_position) == (Change.UNCHANGED, None, ())


rounds = st.lists(st.floats(min_value=1.0, max_value=1e5, allow_nan=False), min_size=1, max_size=20)


@given(rounds, rounds)
def test_the_ratio_interval_holds_the_ratio(base: list[float], head: list[float]) -> None:
    found = ratio_of_medians(base, head)
    if found.low is not None:
        assert found.low <= found.ratio <= found.high


@given(rounds, st.integers(0, 1000), st.lists(st.floats(min_value=1.0, max_value=1e5), max_size=30))
def test_identical_samples_never_flag(tokens: list[float], accepted: int, history: list[float]) -> None:
    side = CellSample(tokens, drafts=1000, draft_tokens=3000, accepted_tokens=accepted,
                      accepted_per_position=(accepted // 2, accepted // 3, accepted - accepted // 2 - accepted // 3))
    verdict = cell_verdict(side, side, history=history)
    assert (verdict.change, verdict.reasons) == (Change.UNCHANGED, ())


def test_a_ratio_the_repeats_cannot_tell_from_one_is_not_a_change() -> None:
    # Three engine starts a side: 1.13x, beyond a learned 5 %, but the interval
    # [1284 / 1389, 1513 / 1236] = [0.92, 1.22] holds 1.
    found = throughput_change([1389.0, 1236.0, 1285.0], [1284.0, 1513.0, 1458.0], threshold=LEARNED)
    assert found.ratio.ratio == pytest.approx(1458 / 1285)
    assert (found.ratio.low, found.ratio.high) == pytest.approx((1284 / 1389, 1513 / 1236))
    assert found.change is Change.UNCHANGED


@pytest.mark.parametrize(("confidence", "shown"), [
    (0.95, "95 %"), (1 - 0.0384, "96 %"), (1 - 0.00599, "99.4 %"), (1 - 0.00292, "99.7 %"), (0.9996, "99.96 %"),
    (0.99999, "99.999 %"),
])
def test_a_level_keeps_the_first_significant_digit_of_its_alpha(confidence: float, shown: str) -> None:
    assert level_text(confidence) == shown
