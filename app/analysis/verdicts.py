"""One cell, base build against head build: better, worse or unchanged, and why.

Pure functions, standard library only. The unit of tokens/s is the engine start (a repeat, summarised
by the median of its rounds): rounds inside one engine start share its luck, and on a shared host one
start can run 1.6x faster than another, which its rounds never show. Tokens/s is judged (``speed_change``),
the first that applies: by the differences of starts run in pairs on one worker, by the noise model of the cell's
class (``app.analysis.noise``: how far starts of one cell spread when nothing changed, per GPU kind, backend, graph
mode, draft or none, and mode), by Mann-Whitney U over the repeats' medians when there are enough of them for
p < 0.002 (asv's rule), by the ratio of medians against a threshold learned from the cell's own history (Conbench's
lookback z-score); with none of these only a gross ratio is called. Acceptance is judged by two-proportion tests
with a minimum effect (``app.analysis.proportions``).
"""

import dataclasses
import enum
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.analysis.fallback import scaled_ends
from app.analysis.noise import Spread, detectable, log_values, pooled_spread, standard_error, t_quantile
from app.analysis.proportions import ALPHA, MIN_EFFECT, ProportionChange, per_position_changes, two_proportions
from app.analysis.ranks import mann_whitney, smallest_p_value
from app.analysis.rounds import median_interval

# asv's level for "these two samples differ" (``asv compare``'s default).
ASV_ALPHA = 0.002
# The fewest repeats a side for which Mann-Whitney can reach ASV_ALPHA (2 / C(14, 7) = 0.00058).
REPEATS_FOR_TEST = next(n for n in range(1, 50) if smallest_p_value(n, n) < ASV_ALPHA)
# The relative change of tokens/s that counts when Mann-Whitney backs it but the cell has too little history to
# learn its own threshold: 7 engine starts a side already carry the between-start noise in the test.
DEFAULT_THRESHOLD = 0.05
# Without the test and without history, a ratio says little. Six engine starts of one build on the shared
# 2-core CPU host (tests/data/aa-cpu, 3 rounds each) ran at 737 to 1594 tok/s: single-start A/A ratios
# up to 2.16x, and 10 of their 15 pairs were flagged at a 5 % threshold. A ratio is still called when it
# lies beyond AA_SPREAD ** WITHOUT_HISTORY_FACTOR (3.26x either way: the widest A/A ratio seen, rounded
# up, and half as far again on the log scale, as six starts under-sample the tail); a smaller one
# beyond DEFAULT_THRESHOLD is UNDECIDED, "not enough repeats to call", never worse. The patch that
# slows each drafting step by 20 ms measured 0.17x and 0.20x from one start a side: called.
AA_SPREAD = 2.2
WITHOUT_HISTORY_FACTOR = 1.5
THROUGHPUT_SPREAD = AA_SPREAD ** WITHOUT_HISTORY_FACTOR  # 3.26: the ratio called without a model, history or test
# Conbench's default: a value more than 5 standard deviations from the history's mean is a change.
Z_THRESHOLD = 5.0
# Fewer history points than this (after trimming) say too little about the noise: the default applies.
MIN_HISTORY = 5
# How far back the history goes (Conbench's DISTRIBUTION_COMMITS is 100).
# A cell's history is read this many builds back (app.comparisons.service reads no more, so a page costs the
# same however long the project has run).
LOOKBACK = 10
# History values further than this many scaled MADs from its median are outliers, left out of the spread.
TRIM_MADS = 5.0
_MAD_TO_SD = 1.4826  # MAD x 1.4826 estimates the standard deviation of a normal sample
# The two-sided level of the noise model's and the pairs' interval: a change is called when the 95 % interval of
# the ratio excludes 1 (and the ratio passes DEFAULT_THRESHOLD). A CI run that looks again after more starts
# tests each look at a share of it (``app.analysis.sequential``).
SPEED_ALPHA = 0.05
_LARGEST_LOG = math.log(sys.float_info.max)
# Pairs of starts enough to stand alone where the class has no A/A pairs (``paired_spread``): 2 degrees of freedom.
PAIRS_ALONE = 3


class Change(enum.StrEnum):
    BETTER = "better"
    WORSE = "worse"
    UNCHANGED = "unchanged"
    UNDECIDED = "undecided"  # moved beyond DEFAULT_THRESHOLD, with too few starts for its noise to call it


class Rule(enum.StrEnum):
    """Which rule called a cell's tokens/s (``speed_change``), the first that applied."""

    PAIRED = "paired"  # the differences of base and head starts run back to back on one worker
    NOISE_MODEL = "noise_model"  # the cell's class's noise model: the spread of starts when nothing changed
    MANN_WHITNEY = "mann_whitney"  # no model: 7 or more starts a side
    HISTORY = "history"  # no model: a threshold from the cell's history on earlier builds
    NO_MODEL = "no_model"  # none of those: only a ratio beyond 3.26x either way is called


@dataclass(frozen=True)
class RatioInterval:
    """``ratio = median(head) / median(base)`` and an interval holding the ratio of the population medians
    with probability at least ``confidence`` (None: a side has fewer than 2 values)."""

    ratio: float
    low: float | None
    high: float | None
    confidence: float | None


@dataclass(frozen=True)
class Threshold:
    """The relative change of tokens/s that counts, and where it came from (``history`` or ``default``)."""

    relative: float
    source: str
    points: int


@dataclass(frozen=True)
class ThroughputChange:
    """The tokens/s verdict and the ``rule`` that made it. ``p_value``: Mann-Whitney's, None when that test was not
    used. ``detectable``: the smallest relative change these starts find four times in five under the noise the
    call used (None without a noise model); ``pairs``: the pairs of starts the call read (``Rule.PAIRED``)."""

    change: Change
    ratio: RatioInterval
    threshold: Threshold
    p_value: float | None
    rule: Rule = Rule.NO_MODEL
    detectable: float | None = None
    pairs: int = 0


@dataclass(frozen=True)
class CellSample:
    """What one build measured in one cell: tokens/s of each repeat (the median of its rounds), summed counters."""

    tokens_per_s: Sequence[float]
    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_position: Sequence[int] = ()


@dataclass(frozen=True)
class Verdict:
    change: Change
    reasons: tuple[str, ...]
    throughput: ThroughputChange
    acceptance: ProportionChange | None = None
    per_position: tuple[ProportionChange, ...] = field(default=())

    @property
    def acceptance_change(self) -> Change | None:
        """Worse if the acceptance or any position's dropped (flagged), else better if any rose; None without drafts."""
        if self.acceptance is None:
            return None
        moved = [p.difference for p in (self.acceptance, *self.per_position) if p.flagged]
        return Change.WORSE if any(d < 0 for d in moved) else Change.BETTER if moved else Change.UNCHANGED


def ratio_of_medians(base: Sequence[float], head: Sequence[float], confidence: float = 0.95) -> RatioInterval:
    """``median(head) / median(base)`` with an order-statistic interval.

    With each side's distribution-free median interval ``[l, u]`` at level ``c`` (``median_interval``),
    the ratio's interval is ``[l_h / u_b, u_h / l_b]``: when both intervals hold their medians it holds
    the ratio, so by Bonferroni its confidence is at least ``c_h + c_b - 1`` (5 rounds a side:
    0.9375 + 0.9375 - 1 = 0.875). It always holds the estimate.

    Raises
    ------
    ValueError
        If a side is empty or a base value is not positive.
    """
    if not base or not head:
        raise ValueError(f"both samples need values: base has {len(base)}, head has {len(head)}")
    if min(base) <= 0:
        raise ValueError(f"base tokens/s must be positive, got {min(base)}")
    b, h = median_interval(base, confidence), median_interval(head, confidence)
    ratio = h.median / b.median
    if b.low is None or h.low is None:
        return RatioInterval(ratio, None, None, None)
    return RatioInterval(ratio, h.low / b.high, h.high / b.low, h.confidence + b.confidence - 1.0)


def history_threshold(
    history: Sequence[float], *, z: float = Z_THRESHOLD, lookback: int = LOOKBACK, default: float = DEFAULT_THRESHOLD
) -> Threshold:
    """The relative change of tokens/s this cell's history says is beyond noise: ``z * sd / mean``.

    Takes the last ``lookback`` values of the cell's history (its medians on earlier builds of the same
    GPU kind, oldest first), leaves out those further than ``TRIM_MADS`` scaled MADs
    (``1.4826 * median(|x - median(x)|)``) from the median, then ``sd`` and ``mean`` are the sample
    standard deviation and the mean of the rest. It is Conbench's lookback z-score turned around: a
    head median ``z`` standard deviations from the history's level is a change, i.e. a relative
    change of ``z * sd / mean``. With fewer than ``MIN_HISTORY`` values left, ``default`` (5 %).

    It does not look at the builds' order or at steps in the history (``app.analysis.changepoints``
    does); a history straddling a step has a wider spread, hence a larger threshold.

    Raises
    ------
    ValueError
        If a history value is not positive.
    """
    recent = list(history)[-lookback:]
    if any(v <= 0 for v in recent):
        raise ValueError(f"history tokens/s must be positive, got {min(recent)}")
    if len(recent) >= MIN_HISTORY:
        centre = statistics.median(recent)
        scale = _MAD_TO_SD * statistics.median(abs(v - centre) for v in recent)
        kept = [v for v in recent if abs(v - centre) <= TRIM_MADS * scale] if scale > 0 else recent
        if len(kept) >= MIN_HISTORY:
            return Threshold(z * statistics.stdev(kept) / statistics.fmean(kept), "history", len(kept))
    return Threshold(default, "default", 0)


def throughput_change(
    base: Sequence[float], head: Sequence[float], *, threshold: Threshold, alpha: float = ASV_ALPHA
) -> ThroughputChange:
    """Better or worse when the ratio of the repeats' medians leaves ``[1 - t, 1 + t]`` and something backs it.

    ``base`` and ``head`` hold one value per engine start (a repeat's median over its rounds). Backing,
    the first that applies:

    1. Enough repeats for Mann-Whitney to reach ``p < alpha`` at all (``smallest_p_value(m, n) < alpha``,
       7 a side at asv's 0.002): ``p < alpha``, as ``asv compare`` needs both a factor and a difference.
    2. A threshold learned from history (``threshold.source == "history"``: the history's points are
       engine starts of earlier builds, so its spread holds the between-start noise): the ratio's
       order-statistic interval over the repeats excludes 1 (one repeat a side: the ratio alone).
    3. Neither: the ratio must also lie beyond ``AA_SPREAD ** WITHOUT_HISTORY_FACTOR`` either way
       (``< 1 / 3.26`` or ``> 3.26``), half as far again as the widest A/A spread of single starts on
       the log scale;
       a ratio past ``1 +- t`` but inside that is ``UNDECIDED``: not enough repeats to call.

    Identical samples give a ratio of 1: never a change. O(m n) for the test.
    """
    ratio = ratio_of_medians(base, head)
    t = threshold.relative
    moved = Change.WORSE if ratio.ratio < 1.0 - t else Change.BETTER if ratio.ratio > 1.0 + t else Change.UNCHANGED
    if smallest_p_value(len(head), len(base)) < alpha:
        p_value = mann_whitney(base, head).p_value
        return ThroughputChange(moved if p_value < alpha else Change.UNCHANGED, ratio, threshold, p_value, Rule.MANN_WHITNEY)
    if threshold.source == "history":
        if ratio.low is not None and ratio.low <= 1.0 <= ratio.high:
            moved = Change.UNCHANGED
        return ThroughputChange(moved, ratio, threshold, None, Rule.HISTORY)
    # Compared without a logarithm: stored speeds of 1e308 and 5e-324 make the ratio 0 or infinite.
    beyond_noise = not 1 / THROUGHPUT_SPREAD <= ratio.ratio <= THROUGHPUT_SPREAD
    if moved is not Change.UNCHANGED and not beyond_noise:
        moved = Change.UNDECIDED
    return ThroughputChange(moved, ratio, threshold, None)


def model_change(base: Sequence[float], head: Sequence[float], noise: Spread, *, alpha: float = SPEED_ALPHA,
                 min_effect: float = DEFAULT_THRESHOLD) -> ThroughputChange:
    """Tokens/s called by the noise model, from each side's speeds (one per engine start).

    With ``x = ln tokens/s``, ``d = mean(x_head) - mean(x_base)`` and ``se = s sqrt(1/n_b + 1/n_h)``, ``s`` and its
    ``df`` from ``noise`` (the class's pooled spread between starts, which already pools these cells' own starts
    when they have two or more), the ratio of geometric means ``r = exp(d)`` has the interval
    ``exp(d +- t_{df, 1 - alpha/2} se)``: the spread comes from other cells too, so it holds with one start a side.
    Then (:func:`_called`): ``worse`` or ``better`` when the interval excludes 1 and ``|r - 1| >= min_effect``;
    ``undecided`` when ``|r - 1| >= min_effect`` but the interval holds 1 (more starts would tell); else
    ``unchanged``. ``detectable`` is ``exp((t_{df, 1-alpha/2} + t_{df, 0.8}) se) - 1``
    (``app.analysis.noise.detectable``). Raises ValueError when a side has no positive speed.
    """
    xb, xh = log_values(base), log_values(head)
    if not xb or not xh:
        raise ValueError(f"each side needs a positive speed: base has {len(xb)}, head has {len(xh)}")
    d = math.fsum(xh) / len(xh) - math.fsum(xb) / len(xb)
    return _called(d, standard_error(noise, len(xb), len(xh)), noise.df, Rule.NOISE_MODEL,
                   alpha=alpha, min_effect=min_effect)


def paired_spread(differences: Sequence[float], noise: Spread | None, paired: Spread | None = None) -> Spread | None:
    """The spread of one pair's log difference ``ln head_i - ln base_i``, from the pairs and what the class knows.

    With the class's spread of A/A pairs (``paired``, ``s_0`` on ``df_0``: pairs of starts of one build run back to
    back, whose differences the host's drift leaves alone), pooled with the pairs' own:

    .. math::

        s_d^2 = \\frac{df_0 s_0^2 + \\sum_i (d_i - \\bar d)^2}{df_0 + n - 1}, \\qquad df = df_0 + n - 1

    so a cell whose pairs spread more than its class widens its interval. Without A/A pairs, three pairs or more
    stand alone (a paired t test on ``n - 1`` degrees of freedom): the class's spread of unpaired starts holds the
    drift that pairing removes, so it would take back what pairing gains. With fewer, that spread stands in,
    twice over (``2 s^2`` on its ``df``: a difference carries two starts' luck), pooled as above. None when
    nothing is known (one pair, no model).
    """
    own = pooled_spread([list(differences)])
    prior = paired
    if prior is None and len(differences) < PAIRS_ALONE and noise is not None:
        prior = Spread(noise.sd * math.sqrt(2), noise.df, noise.groups, noise.values)
    if prior is None:
        return own
    squares = prior.df * prior.sd ** 2 + (own.sd ** 2 * own.df if own else 0.0)
    df = prior.df + (own.df if own else 0)
    return Spread(math.sqrt(squares / df), df, prior.groups + (1 if own else 0), prior.values + len(differences))


def paired_change(pairs: Sequence[tuple[float, float]], noise: Spread | None, *, paired: Spread | None = None,
                  alpha: float = SPEED_ALPHA, min_effect: float = DEFAULT_THRESHOLD) -> ThroughputChange | None:
    """Tokens/s called from starts run in pairs, base then head on one worker: the host's drift falls out of each
    pair's difference.

    ``pairs`` holds ``(base, head)`` tokens/s. With ``d_i = ln head_i - ln base_i``, ``d = mean(d_i)``, ``s_d`` of
    :func:`paired_spread` and ``se = s_d / sqrt(n)``: the interval ``exp(d +- t_{df, 1-alpha/2} se)`` and the call
    of :func:`_called`. None when nothing can be said from the pairs (one pair and no model, or none).
    """
    differences = [math.log(h) - math.log(b) for b, h in pairs if b > 0 and h > 0]
    spread = paired_spread(differences, noise, paired) if differences else None
    if spread is None:
        return None
    d = math.fsum(differences) / len(differences)
    found = _called(d, spread.sd / math.sqrt(len(differences)), spread.df, Rule.PAIRED, alpha=alpha, min_effect=min_effect)
    return dataclasses.replace(found, pairs=len(differences))


def _called(d: float, se: float, df: int, rule: Rule, *, alpha: float, min_effect: float) -> ThroughputChange:
    """A log ratio ``d`` with standard error ``se`` on ``df`` degrees of freedom as a call: see :func:`model_change`."""
    half = t_quantile(1 - alpha / 2, df) * se
    # Stored speeds of 1e7 and 5e-324 put d past what exp holds: no interval, and a ratio no noise could make.
    value = math.exp(d) if d < _LARGEST_LOG else math.inf
    low, high = (scaled_ends(value, -half, half) if math.isfinite(value) else None) or (None, None)
    ratio = RatioInterval(value, low, high, 1 - alpha if low is not None else None)
    if abs(ratio.ratio - 1) < min_effect:
        change = Change.UNCHANGED
    elif low is not None and low <= 1 <= high:
        change = Change.UNDECIDED
    else:
        change = Change.BETTER if ratio.ratio > 1 else Change.WORSE
    return ThroughputChange(change, ratio, Threshold(min_effect, "minimum effect", 0), None, rule,
                            detectable(se, df, alpha=alpha))


def speed_change(base: Sequence[float], head: Sequence[float], *, pairs: Sequence[tuple[float, float]] = (),
                 noise: Spread | None = None, paired_noise: Spread | None = None, history: Sequence[float] = (),
                 alpha: float = SPEED_ALPHA) -> ThroughputChange:
    """The one rule for a cell's tokens/s, head against base, the first that applies:

    1. ``pairs`` (base and head starts run back to back on one worker): :func:`paired_change` with the class's
       A/A pairs' spread (``paired_noise``) or its starts' (``noise``), when it can say anything (two pairs, or
       one with a model);
    2. a noise model for the cell's class (``noise``): :func:`model_change` over every start of each side;
    3. neither: :func:`throughput_change` against :func:`history_threshold` of ``history`` (Mann-Whitney with
       7 starts a side, the history's threshold, else only a ratio beyond 3.26x).

    ``alpha`` is the level of the first two (a CI run's later looks pass a share of it).
    """
    if pairs and (found := paired_change(pairs, noise, paired=paired_noise, alpha=alpha)) is not None:
        return found
    if noise is not None:
        return model_change(base, head, noise, alpha=alpha)
    return throughput_change(base, head, threshold=history_threshold(history))


def level_text(confidence: float) -> str:
    """A two-sided level as a reader should see it: ``95 %``, ``99.4 %`` (a later look's alpha 0.006), ``99.96 %``:
    as many decimals as keep the first significant digit of ``1 - confidence`` (in percent: ``max(0, -floor(log10
    (100 (1 - confidence))))``), so a small alpha never rounds to 100 %, which would claim certainty no interval has."""
    alpha = 100 * (1 - confidence)
    decimals = max(0, -math.floor(math.log10(alpha) + 1e-9)) if alpha > 0 else 4  # 1e-9: 0.001 stored as 0.00099999
    return f"{100 - alpha:.{decimals}f} %"


def speed_sentence(found: ThroughputChange) -> str:
    """What a tokens/s call says and could have seen: ``tokens/s 0.97x [0.91, 1.03] (noise model, 95 %): could
    detect 8 % or more; none seen``. Without a noise model, the ratio, its interval and the rule alone."""
    ratio = found.ratio
    interval = f" [{ratio.low:.2f}, {ratio.high:.2f}]" if ratio.low is not None else ""
    source = {Rule.PAIRED: f"{found.pairs} pair{'s' if found.pairs != 1 else ''} of starts",
              Rule.NOISE_MODEL: "noise model"}.get(found.rule, found.rule.value.replace("_", " "))
    level = f", {level_text(ratio.confidence)}" if ratio.confidence is not None and found.detectable is not None else ""
    said = f"tokens/s {ratio.ratio:.2f}x{interval} ({source}{level})"
    if found.detectable is None:
        return said
    outcome = {Change.UNCHANGED: "none seen", Change.UNDECIDED: "too few starts to call", Change.WORSE: "slower",
               Change.BETTER: "faster"}[found.change]
    return f"{said}: could detect {100 * found.detectable:.0f} % or more; {outcome}"


def cell_verdict(
    base: CellSample,
    head: CellSample,
    *,
    history: Sequence[float] = (),
    noise: Spread | None = None,
    paired_noise: Spread | None = None,
    pairs: Sequence[tuple[float, float]] = (),
    speed_alpha: float = SPEED_ALPHA,
    alpha: float = ALPHA,
    min_effect: float = MIN_EFFECT,
) -> Verdict:
    """Worse if tokens/s, acceptance or any position's acceptance got worse; else better if any got better.

    Tokens/s by :func:`speed_change` (``pairs``, ``noise``, ``paired_noise``, ``history``, at ``speed_alpha``); acceptance
    (``accepted_tokens / draft_tokens``) by ``two_proportions`` and each position
    (``accepted_per_position[i] / drafts``) by ``per_position_changes``, at ``alpha`` and ``min_effect``,
    when both sides drafted. One reason per flagged measure, the worse ones first. A change in both directions
    (faster but accepting less) is worse: a regression is never hidden by a gain elsewhere; tokens/s too
    uncertain to call (``UNDECIDED``) keeps a gain in acceptance from making the cell better.
    """
    throughput = speed_change(base.tokens_per_s, head.tokens_per_s, pairs=pairs, noise=noise, paired_noise=paired_noise,
                              history=history, alpha=speed_alpha)
    reasons: list[tuple[Change, str]] = []
    if throughput.change is not Change.UNCHANGED:
        reasons.append((throughput.change, _throughput_reason(throughput)))
    acceptance, positions = None, ()
    if base.draft_tokens and head.draft_tokens:
        acceptance = two_proportions(
            base.accepted_tokens, base.draft_tokens, head.accepted_tokens, head.draft_tokens,
            alpha=alpha, min_effect=min_effect,
        )
        positions = per_position_changes(
            base.accepted_per_position, base.drafts, head.accepted_per_position, head.drafts,
            alpha=alpha, min_effect=min_effect,
        )
        for name, found in [("acceptance", acceptance), *((f"position {i + 1} acceptance", p) for i, p in enumerate(positions))]:
            if found.flagged:
                reasons.append((_direction(found.difference), _proportion_reason(name, found)))
    changes = {change for change, _ in reasons}
    change = next((c for c in (Change.WORSE, Change.UNDECIDED, Change.BETTER) if c in changes), Change.UNCHANGED)
    ordered = sorted(reasons, key=lambda r: r[0] is not Change.WORSE)
    return Verdict(change, tuple(text for _, text in ordered), throughput, acceptance, positions)


def _direction(difference: float) -> Change:
    return Change.BETTER if difference > 0 else Change.WORSE


def _throughput_reason(found: ThroughputChange) -> str:
    ratio = found.ratio
    interval = f" [{ratio.low:.2f}, {ratio.high:.2f}]" if ratio.low is not None else ""
    if found.detectable is not None:
        return speed_sentence(found)
    if found.change is Change.UNDECIDED:
        return (f"tokens/s {ratio.ratio:.2f}x{interval}: not enough repeats to call (no noise model for its GPU kind, "
                f"backend, graph mode and draft, fewer than {REPEATS_FOR_TEST} engine starts a side for Mann-Whitney, "
                "no history)")
    test = f"Mann-Whitney p = {found.p_value:.2g}" if found.p_value is not None else "too few repeats for a test"
    where = f"{found.threshold.source} threshold {found.threshold.relative:.1%}"
    return f"tokens/s {ratio.ratio:.2f}x{interval} ({test}; {where})"



def _proportion_reason(name: str, found: ProportionChange) -> str:
    points = 100.0 * found.difference
    return (
        f"{name} {found.base_rate:.1%} -> {found.head_rate:.1%}: {points:+.1f} points "
        f"[{100 * found.low:+.1f}, {100 * found.high:+.1f}] (p = {found.p_value:.2g})"
    )
