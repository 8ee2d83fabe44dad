"""One engine start's tokens/s from its passes: the statistic a result reports, and a block-bootstrap interval for it.

Pure functions, standard library only. A pass is one run of the workload through ``llm.generate`` /
``llm.chat`` inside a measured round; a round is consecutive passes until its window was filled (cell schema
6 keeps each pass's seconds and output tokens, the passes of a round tiling its window). Passes of one engine
are not independent: on the H200 a drafter's slow passes came in runs of 5-6 (down to 0.73x), so an interval
that resampled passes one by one would treat a run as scattered bad luck and come out too narrow. The blocks
of a moving-block bootstrap keep such runs together.

Nothing here reads the database, the clock or global state; the bootstrap's generator is seeded.
"""

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from app.analysis.rounds import MedianInterval, median_interval

# Fewer passes than this give no bootstrap interval (a percentile bootstrap of a handful undercovers): the
# start keeps its rounds' order-statistic interval (app.analysis.rounds).
MIN_PASSES = 10
RESAMPLES = 2000
SEED = 0
# More passes than this are merged, neighbours within a round, before resampling (``merged``): the bootstrap's
# cost grows with them (2000 resamples of 5000 passes one by one took 22 s, of 500 2.4 s), its answer hardly.
MAX_RESAMPLED = 200
# Politis and White's constants: autocorrelations below C * sqrt(log10(n) / n) count as zero, and the
# bandwidth is the first lag after which K_N of them in a row do.
_C = 2.0


@dataclass(frozen=True)
class PassInterval:
    """A start's tokens/s (``value``, what ``start_speed`` gives) and its circular-block-bootstrap interval
    ``[low, high]`` at ``confidence``: ``passes`` passes (after ``merged``) resampled in blocks of ``block``."""

    value: float
    low: float
    high: float
    confidence: float
    block: int
    passes: int


def start_interval(rounds: Sequence[tuple[float, int, Sequence[tuple[float, int]]]]) -> tuple[MedianInterval, int | None]:
    """One engine start's tokens/s, the median over its rounds, with its interval, and the passes that interval
    resampled (None: the interval is the rounds').

    ``rounds`` are ``(seconds, output tokens, passes)``, each pass ``(seconds, output tokens)``. Where every round
    kept its passes (cell schema 6, offline) and there are ``MIN_PASSES`` or more, the interval is ``block_bootstrap``
    of the rounds' median over the passes (95 %): it allows for runs of slow passes, which the rounds' order
    statistics see only as a slow round. Otherwise (older schemas, serving rounds, too few passes) it is the
    rounds' order-statistic interval at the level their count allows (``median_interval``). Rounds of no time are
    left out of the median, as the service always has. The one function behind a start's interval: the service
    stores it (``app.results.service``), the benchmarks print it. O(B n) with passes, else O(R log R).

    Raises ValueError on no rounds.
    """
    if not rounds:
        raise ValueError("no rounds")
    found = median_interval([tokens / seconds for seconds, tokens, _ in rounds if seconds > 0] or [0.0])
    if not all(passes and seconds > 0 for seconds, _, passes in rounds):
        return found, None
    boot = block_bootstrap([s for _, _, passes in rounds for s, _ in passes],
                           [k for _, _, passes in rounds for _, k in passes], [len(passes) for _, _, passes in rounds])
    if boot is None:
        return found, None
    # The same statistic as the rounds' median, up to the passes' float sums: the point stays the rounds'.
    interval = MedianInterval(found.median, min(boot.low, found.median), max(boot.high, found.median), boot.confidence,
                              found.n)
    return interval, sum(len(passes) for _, _, passes in rounds)


def start_speed(seconds: Sequence[float], tokens: Sequence[int], sizes: Sequence[int]) -> float:
    """The start's tokens/s from its passes: the median over rounds of each round's tokens over its seconds.

    Round ``r`` holds the next ``sizes[r]`` passes, so with :math:`R_r` its passes

    .. math::

        T = \\operatorname{median}_r \\frac{\\sum_{i \\in R_r} k_i}{\\sum_{i \\in R_r} s_i}

    with :math:`k_i` a pass's output tokens and :math:`s_i` its seconds (the median of an even count is the mean
    of the middle two, as ``statistics.median``). As the passes tile their round, this is the rounds' median
    the service stores (``app.results.service``): the bootstrap resamples the statistic a result reports.

    Raises ValueError when the sizes do not add up to the passes, a size is below 1, or a round has no seconds.
    O(n).
    """
    if sum(sizes) != len(seconds) or len(seconds) != len(tokens) or any(size < 1 for size in sizes):
        raise ValueError(f"rounds of {list(sizes)} passes do not hold {len(seconds)} passes")
    speeds, at = [], 0
    for size in sizes:
        spent = sum(seconds[at:at + size])
        if spent <= 0:
            raise ValueError("a round of passes took no time")
        speeds.append(sum(tokens[at:at + size]) / spent)
        at += size
    return statistics.median(speeds)


def block_length_estimate(values: Sequence[float]) -> float:
    """Politis and White's estimate of the circular block bootstrap's best block length for ``values``.

    With :math:`\\hat R(k) = n^{-1} \\sum_{t=1}^{n-k} (x_t - \\bar x)(x_{t+k} - \\bar x)` and
    :math:`\\hat\\rho(k) = \\hat R(k) / \\hat R(0)`:

    1. :math:`\\hat m` is the smallest :math:`m \\ge 0` with :math:`|\\hat\\rho(m + j)| < 2 \\sqrt{\\log_{10} n / n}`
       for :math:`j = 1, \\dots, K_N`, :math:`K_N = \\max(5, \\lceil \\sqrt{\\log_{10} n} \\rceil)`; the bandwidth is
       :math:`M = \\min(2 \\max(\\hat m, 1), m_{max})`, :math:`m_{max} = \\lceil \\sqrt n \\rceil + K_N`
       (:math:`M = m_{max}` when no such :math:`\\hat m` is found). At least 2, so lag 1 always counts (as
       ``arch.bootstrap.optimal_block_length`` does).
    2. With the flat-top window :math:`\\lambda(t) = 1` for :math:`|t| \\le 1/2`, :math:`2 (1 - |t|)` up to 1,
       0 beyond: :math:`\\hat G = \\sum_{|k| \\le M} \\lambda(k / M) |k| \\hat R(k)` and
       :math:`\\hat g = \\sum_{|k| \\le M} \\lambda(k / M) \\hat R(k)`.
    3. :math:`\\hat b = (2 \\hat G^2 / D)^{1/3} n^{1/3}` with :math:`D = \\tfrac43 \\hat g^2` (circular blocks).

    Runs of slow passes make neighbouring passes alike (:math:`\\hat R(k) > 0` for small k): :math:`\\hat G` and
    the block grow with the runs. Independent passes give :math:`\\hat G \\approx 0`: blocks of one, the iid
    bootstrap (``block_length`` puts a floor under it). Returns 0 where there is no spread
    (:math:`\\hat R(0) = 0`) or :math:`\\hat g \\le 0`.

    Raises ValueError below 3 values. O(n sqrt n).

    Notes
    -----
    Politis, D. N. and White, H. (2004), "Automatic block-length selection for the dependent bootstrap",
    Econometric Reviews 23(1); the circular block's constant corrected in Patton, A., Politis, D. N. and White,
    H. (2009), Econometric Reviews 28(4).
    """
    n = len(values)
    if n < 3:
        raise ValueError(f"a block length needs at least 3 values, got {n}")
    mean = math.fsum(values) / n
    d = [x - mean for x in values]
    k_n = max(5, math.ceil(math.sqrt(math.log10(n))))
    m_max = math.ceil(math.sqrt(n)) + k_n
    acov = [math.fsum(d[t] * d[t + k] for t in range(n - k)) / n if k < n else 0.0 for k in range(m_max + k_n + 1)]
    if acov[0] <= 0:
        return 0.0
    threshold = _C * math.sqrt(math.log10(n) / n)
    small = [abs(r / acov[0]) < threshold for r in acov]
    found = next((m for m in range(m_max + 1) if all(small[m + 1:m + k_n + 1])), None)
    bandwidth = m_max if found is None else min(2 * max(found, 1), m_max)
    g_hat = acov[0] + 2 * math.fsum(_flat_top(k / bandwidth) * acov[k] for k in range(1, bandwidth + 1))
    big_g = 2 * math.fsum(_flat_top(k / bandwidth) * k * acov[k] for k in range(1, bandwidth + 1))
    if g_hat <= 0:
        return 0.0
    return (2 * big_g ** 2 / (4 / 3 * g_hat ** 2)) ** (1 / 3) * n ** (1 / 3)


def block_length(values: Sequence[float]) -> int:
    """The block length for ``values``: :math:`b = \\max(\\lfloor n^{1/3} \\rceil, \\lfloor \\hat b \\rceil)` with
    :math:`\\hat b` from ``block_length_estimate``, at most :math:`b_{max} = \\lceil \\min(3 \\sqrt n, n / 3) \\rceil`
    (longer blocks leave too few distinct resamples) and at least 1.

    Why the floor: :math:`n^{1/3}` is the order of the best block for estimating a statistic's variance (Hall,
    Horowitz and Jing 1995, Biometrika 82(3)); Politis and White's estimate of its constant is noisy at the 25-50
    passes of a start, and short where its smallest bandwidth (2 lags) cuts longer dependence off, so it is taken
    only where it asks for more. On seeded AR(1) passes (log-speed :math:`\\phi = 0.7`, five rounds; 100 starts,
    ``tests/analysis/test_passes.py``) the intervals held the centre in 93 of 100 starts of 50 passes (one by one:
    70) and 81 of 30 (their estimate alone: 77; one by one: 68); of independent passes, 94 (one by one: 95).
    O(n sqrt n).
    """
    n = len(values)
    most = math.ceil(min(3 * math.sqrt(n), n / 3))
    wanted = max(math.floor(n ** (1 / 3) + 0.5), math.floor(block_length_estimate(values) + 0.5))
    return max(1, min(most, wanted))


def block_bootstrap(
    seconds: Sequence[float],
    tokens: Sequence[int],
    sizes: Sequence[int],
    *,
    confidence: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    block: int | None = None,
) -> PassInterval | None:
    """A percentile interval for ``start_speed`` by the circular block bootstrap over the passes.

    The passes, in the order they ran, are a circle :math:`x_0, \\dots, x_{n-1}` (pass ``i`` its seconds and
    tokens). Each resample draws :math:`\\lceil n / b \\rceil` starts uniformly from :math:`\\{0, \\dots, n-1\\}`
    (``random.Random(seed)``), takes :math:`b` consecutive passes from each (wrapping past the end), keeps the
    first :math:`n`, splits them into rounds of the original ``sizes`` and computes :math:`T^*` as
    ``start_speed`` does. With :math:`T^*_{(1)} \\le \\dots \\le T^*_{(B)}` the interval is
    :math:`[T^*_{(\\lceil B\\alpha/2 \\rceil)}, T^*_{(\\lceil B(1-\\alpha/2) \\rceil)}]`, :math:`\\alpha = 1 -` confidence,
    widened where needed to hold :math:`T` itself.

    Over ``MAX_RESAMPLED`` passes, neighbouring passes of each round are merged first (``merged``): the
    statistic is the same, its resampling coarser. ``block`` defaults to ``block_length`` of the pass speeds
    :math:`k_i / s_i`; ``block=1`` is the iid bootstrap.
    The seed is fixed so a stored result's interval can be computed again to the digit.

    Returns None below ``MIN_PASSES`` passes (the caller keeps the rounds' interval). Raises ValueError as
    ``start_speed`` does, or for a confidence outside (0, 1), fewer than 2 resamples or a block below 1.
    O(B (n / b + R)) for R rounds, each block's sum read off prefix sums.

    Notes
    -----
    Politis, D. N. and Romano, J. P. (1992), "A circular block-resampling procedure for stationary data", in
    *Exploring the Limits of Bootstrap*, Wiley; Lahiri, S. N. (2003), *Resampling Methods for Dependent Data*,
    Springer, ch. 2.
    """
    value = start_speed(seconds, tokens, sizes)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if resamples < 2:
        raise ValueError(f"resamples must be at least 2, got {resamples}")
    if len(seconds) < MIN_PASSES:
        return None
    seconds, tokens, sizes = merged(seconds, tokens, sizes, MAX_RESAMPLED)
    n = len(seconds)
    if block is None:
        block = block_length([k / s if s > 0 else 0.0 for k, s in zip(tokens, seconds, strict=True)])
    if block < 1:
        raise ValueError(f"block must be at least 1, got {block}")
    rng = random.Random(seed)
    blocks = math.ceil(n / block)
    # Sums over any run of consecutive passes, the circle unrolled twice: a block or a part of one is O(1).
    spent, made = _prefix_sums([*seconds, *seconds]), _prefix_sums([*tokens, *tokens])
    stats = sorted(
        _resampled_speed([rng.randrange(n) for _ in range(blocks)], block, sizes, spent, made) for _ in range(resamples)
    )
    alpha = 1.0 - confidence
    # 1-based ranks; the small margin keeps B alpha / 2 = 50 from rounding up to 51.
    low_rank = max(1, math.ceil(resamples * alpha / 2 - 1e-9))
    high_rank = min(resamples, math.ceil(resamples * (1 - alpha / 2) - 1e-9))
    return PassInterval(value, min(value, stats[low_rank - 1]), max(value, stats[high_rank - 1]), confidence, block, n)


def merged(
    seconds: Sequence[float], tokens: Sequence[int], sizes: Sequence[int], most: int
) -> tuple[list[float], list[int], list[int]]:
    """The passes with each round's neighbours merged in groups of :math:`g = \\lceil n / m \\rceil`, ``m = most`` (a
    round's last group may be smaller; seconds and tokens added), and the rounds' new sizes: at most about
    ``most`` passes, and ``start_speed`` unchanged, since a round's sums are. ``g = 1`` leaves them as they are.
    O(n)."""
    group = math.ceil(len(seconds) / most)
    if group <= 1:
        return list(seconds), list(tokens), list(sizes)
    out_seconds, out_tokens, out_sizes, at = [], [], [], 0
    for size in sizes:
        starts = range(at, at + size, group)
        out_seconds += [math.fsum(seconds[i:min(i + group, at + size)]) for i in starts]
        out_tokens += [sum(tokens[i:min(i + group, at + size)]) for i in starts]
        out_sizes.append(len(starts))
        at += size
    return out_seconds, out_tokens, out_sizes


def _resampled_speed(starts: list[int], block: int, sizes: Sequence[int], spent: list[float], made: list[float]) -> float:
    """``start_speed`` of the passes the blocks at ``starts`` lay end to end, from the prefix sums of seconds
    (``spent``) and tokens (``made``) over the circle unrolled twice. A round whose resampled passes took no
    time counts as 0 tokens/s. O(len(starts) + len(sizes))."""
    speeds = []
    current, offset = 0, 0  # the block being read, and how far into it
    for size in sizes:
        seconds = tokens = 0.0
        need = size
        while need:
            take = min(need, block - offset)
            begin = starts[current] + offset
            seconds += spent[begin + take] - spent[begin]
            tokens += made[begin + take] - made[begin]
            need -= take
            offset += take
            if offset == block:
                current, offset = current + 1, 0
        speeds.append(tokens / seconds if seconds > 0 else 0.0)
    return statistics.median(speeds)


def _prefix_sums(values: Sequence[float]) -> list[float]:
    """``[0, v0, v0 + v1, ...]``: the sum of ``values[i:j]`` is ``sums[j] - sums[i]``."""
    sums = [0.0]
    for value in values:
        sums.append(sums[-1] + value)
    return sums


def _flat_top(t: float) -> float:
    """Politis and Romano's trapezoidal flat-top lag window."""
    t = abs(t)
    return 1.0 if t <= 0.5 else 2.0 * (1.0 - t) if t <= 1.0 else 0.0
