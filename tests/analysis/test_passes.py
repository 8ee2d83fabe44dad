"""A start's tokens/s from its passes and its block-bootstrap interval, by hand and on seeded series."""

import math
import random

import pytest

from app.analysis.passes import (
    MIN_PASSES,
    block_bootstrap,
    block_length,
    block_length_estimate,
    merged,
    start_speed,
)

TOKENS = 4096  # one H200 pass: 32 requests of 128 tokens


def passes_at(speeds: list[float]) -> tuple[list[float], list[int]]:
    """Passes of TOKENS tokens each at ``speeds`` tokens/s: their seconds and tokens."""
    return [TOKENS / speed for speed in speeds], [TOKENS] * len(speeds)


def slow_run(seed: int = 1) -> list[float]:
    """30 passes at 100 tok/s with 2 % noise and, as on the H200 drafter, a run of six passes at 0.73x."""
    rng = random.Random(seed)
    speeds = [100 * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(30)]
    return [speed * 0.73 if 12 <= i < 18 else speed for i, speed in enumerate(speeds)]


def test_a_rounds_speed_is_its_tokens_over_its_seconds_and_the_start_the_median_round() -> None:
    # Rounds of 2, 1 and 2 passes: 300 / 3 = 100, 50 / 1 = 50, 240 / 2 = 120 tok/s; the median 100.
    seconds, tokens = [1.0, 2.0, 1.0, 1.0, 1.0], [100, 200, 50, 120, 120]
    assert start_speed(seconds, tokens, [2, 1, 2]) == 100.0
    # An even count of rounds: the mean of the middle two, as statistics.median (and the stored median) take it.
    assert start_speed(seconds[:3], tokens[:3], [2, 1]) == 75.0
    with pytest.raises(ValueError, match="do not hold"):
        start_speed(seconds, tokens, [2, 2])
    with pytest.raises(ValueError, match="no time"):
        start_speed([0.0, 1.0], [5, 5], [1, 1])


def test_a_step_gets_a_block_of_two_by_politis_and_white() -> None:
    # x = 0,0,0,0,1,1,1,1 (n = 8): deviations -/+0.5, R(0) = 0.25, R(1) = (3 x 0.25 - 0.25 + 3 x 0.25) / 8 = 0.15625,
    # rho = 1, .625, .25, -.125, -.5, -.375: all of lags 1-5 under 2 sqrt(log10(8) / 8) = 0.672, so m = 0 and
    # M = 2; lambda(1/2) = 1, lambda(1) = 0: G = 2 x 0.15625 = 0.3125, g = 0.25 + 2 x 0.15625 = 0.5625,
    # b = (2 G^2 / (4/3 g^2))^(1/3) x 8^(1/3) = (0.1953125 / 0.421875)^(1/3) x 2 = 1.5472: a block of 2.
    assert block_length_estimate([0, 0, 0, 0, 1, 1, 1, 1]) == pytest.approx(1.5472, abs=1e-4)
    assert block_length([0, 0, 0, 0, 1, 1, 1, 1]) == 2


def test_passes_without_spread_get_the_floor() -> None:
    # No spread, no estimate (0); the floor, round(12^(1/3)) = round(2.289), stands.
    assert block_length_estimate([5.0] * 12) == 0.0 and block_length([5.0] * 12) == 2
    with pytest.raises(ValueError, match="at least 3"):
        block_length_estimate([1.0, 2.0])


def test_a_run_of_slow_passes_lengthens_the_blocks_within_their_cap() -> None:
    speeds = slow_run()
    # b = 4.01 over the floor of 3; the cap, ceil(min(3 sqrt 30, 30 / 3)) = 10, is not reached.
    assert block_length_estimate(speeds) == pytest.approx(4.011, abs=1e-3) and block_length(speeds) == 4
    # Runs of ten slow and ten fast passes, 60 in all: the estimate (23.1) passes the cap, ceil(min(23.2, 20)), which holds.
    runs = [70.0 if (i // 10) % 2 == 0 else 100.0 for i in range(60)]
    assert block_length_estimate(runs) > 20 and block_length(runs) == 20


def test_the_block_interval_is_wider_than_the_iid_one_where_slow_passes_come_in_a_run() -> None:
    """Resampled one by one, the six slow passes scatter over all five rounds and every resampled median sinks a
    little: the iid interval is narrow, and sits below the start's median. Blocks keep the run together."""
    seconds, tokens = passes_at(slow_run())
    sizes = [6] * 5
    blocks = block_bootstrap(seconds, tokens, sizes)
    iid = block_bootstrap(seconds, tokens, sizes, block=1)
    assert blocks is not None and iid is not None
    assert blocks.block == 4 and iid.block == 1
    assert blocks.value == iid.value == start_speed(seconds, tokens, sizes)
    assert blocks.low <= blocks.value <= blocks.high and iid.low <= iid.value <= iid.high
    assert blocks.high - blocks.low > 1.3 * (iid.high - iid.low)
    assert blocks.low < iid.low
    assert (blocks.confidence, blocks.passes) == (0.95, 30)


def test_the_interval_is_the_same_to_the_digit_for_the_same_passes_and_seed() -> None:
    seconds, tokens = passes_at(slow_run())
    first = block_bootstrap(seconds, tokens, [6] * 5)
    assert first == block_bootstrap(list(seconds), list(tokens), [6] * 5)
    other = block_bootstrap(seconds, tokens, [6] * 5, seed=7)
    assert other is not None and other != first
    assert other.low == pytest.approx(first.low, rel=0.03) and other.high == pytest.approx(first.high, rel=0.03)


def test_passes_all_alike_give_an_interval_of_one_point() -> None:
    seconds, tokens = passes_at([100.0] * 12)
    found = block_bootstrap(seconds, tokens, [4, 4, 4])
    assert found is not None and (found.low, found.value, found.high) == pytest.approx((100.0, 100.0, 100.0))


def test_too_few_passes_leave_the_start_to_its_rounds_interval() -> None:
    seconds, tokens = passes_at([100.0 + i for i in range(MIN_PASSES - 1)])
    assert block_bootstrap(seconds, tokens, [MIN_PASSES - 1]) is None
    with pytest.raises(ValueError, match="confidence"):
        block_bootstrap(seconds, tokens, [MIN_PASSES - 1], confidence=1.0)


def test_merging_neighbours_keeps_every_rounds_sums() -> None:
    # 7 passes in rounds of 4 and 3, at most 3 passes: groups of ceil(7 / 3) = 3, a round's last group smaller.
    seconds, tokens = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [1, 2, 3, 4, 5, 6, 7]
    assert merged(seconds, tokens, [4, 3], 3) == ([6.0, 4.0, 18.0], [6, 4, 18], [2, 1])
    assert merged(seconds, tokens, [4, 3], 10) == (seconds, tokens, [4, 3])
    many_s, many_t = passes_at([100 + (i % 7) for i in range(1000)])
    found = block_bootstrap(many_s, many_t, [200] * 5)
    assert found is not None and found.passes == 200  # merged in pairs first (MAX_RESAMPLED)
    assert found.value == pytest.approx(start_speed(many_s, many_t, [200] * 5))


def coverage(phi: float, passes: int, starts: int = 100, seed: int = 11) -> dict[str, int]:
    """Of ``starts`` seeded AR(1) series of ``passes`` passes around 100 tok/s (log-speed noise
    ``e_t = phi e_(t-1) + N(0, 0.03)``, five rounds), how many intervals hold 100: with ``block_length``'s blocks,
    and one by one."""
    rng = random.Random(seed)
    held = {"block": 0, "iid": 0}
    for _ in range(starts):
        noise, speeds = 0.0, []
        for _ in range(passes):
            noise = phi * noise + rng.gauss(0, 0.03)
            speeds.append(100 * math.exp(noise))
        seconds, tokens = passes_at(speeds)
        for name, block in (("block", None), ("iid", 1)):
            found = block_bootstrap(seconds, tokens, [passes // 5] * 5, resamples=400, block=block)
            assert found is not None
            held[name] += found.low <= 100.0 <= found.high
    return held


def test_block_intervals_hold_a_dependent_series_centre_more_often_than_iid_ones() -> None:
    """With phi = 0.7 (neighbours alike, as in runs of slow passes) passes resampled one by one look more
    independent than they are, and their intervals miss; blocks keep the dependence. Independent passes lose
    nothing to the blocks."""
    dependent = coverage(0.7, 50)
    assert dependent["block"] >= 85 and dependent["iid"] <= 80, dependent
    independent = coverage(0.0, 30)
    assert independent["block"] >= 90 and independent["iid"] >= 90, independent
