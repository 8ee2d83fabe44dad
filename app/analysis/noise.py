"""The noise of tokens/s between engine starts, learned from A/A groups: pure functions, standard library only.

An A/A group is the starts (repeats) of one cell on one build: they differ only in their luck, so their spread
is the noise any comparison of two builds must beat. Everything is on the log scale (``x = ln tokens/s``): a
start's luck multiplies its speed, and a ratio of two cells is a difference of logs.

The model is kept per class (``NoiseClass``): GPU kind x attention backend x graph mode x method class (a draft or
none) x mode (offline, or serving with its concurrency), as the spread between starts differs along each of them
(``NoiseClass`` says where it was seen).

Nothing here reads the database, the clock or global state.
"""

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

ALPHA = 0.05
POWER = 0.8


class NoiseClass(NamedTuple):
    """What a noise figure holds for: cells of one GPU kind, on one attention backend with one graph mode (both as
    the cell asks them), with a draft or none (``method_class`` ``"draft"`` or ``"none"``), in one mode
    (``"offline"``, or ``"serve"`` with its ``concurrency``).

    Why so fine: a draft's starts spread more than a baseline's (tests/data/h200-2026-12-01), and at one GPU kind and
    method they spread differently by backend and graph mode. On one H200 (tests/data/h200-2026-12-04b, beside
    tests/data/h200-2026-12-03 and -04) the FLASHINFER draft cell (asking FULL_AND_PIECEWISE, it runs PIECEWISE)
    had A/A pairs up to 0.25 apart in ln tokens/s (9040 against 7022 tok/s), where the FLASH_ATTN
    FULL_AND_PIECEWISE draft cell's pairs were 0.01 and 0.06 apart. Pooled in one class, FlashInfer's pairs raised
    its paired spread to 0.137 and widened every FLASH_ATTN call: the 25 % slowdown went from worse to undecided
    (0.83x [0.68, 1.01]), the 7 ms drafting spin's 0.84x, worse at [0.78, 0.90] in its CI check, read [0.71, 0.98].
    Kept apart, FLASHINFER's paired spread is 0.188 and FLASH_ATTN's 0.046 (``tests/noise/test_h200.py``)."""

    gpu_kind: str
    backend: str
    graph_mode: str
    method_class: str
    mode: str
    concurrency: int | None

    @classmethod
    def of(cls, gpu_kind: str, backend: str, graph_mode: str, method: str | None, mode: str,
           concurrency: int | None) -> "NoiseClass":
        """The class of a cell with these axes (``method`` None for a baseline); ``concurrency`` counts only serving."""
        return cls(gpu_kind, backend, graph_mode, method_class(method), mode, concurrency if mode == "serve" else None)


def method_class(method: str | None) -> str:
    """``"none"`` for a baseline cell (no speculative method), ``"draft"`` for any speculative method."""
    return "none" if method is None else "draft"


@dataclass(frozen=True)
class Spread:
    """A pooled standard deviation ``sd`` of log values with its degrees of freedom ``df``, from ``groups`` groups
    of at least two values holding ``values`` values in all."""

    sd: float
    df: int
    groups: int
    values: int

    @property
    def cv(self) -> float:
        """``exp(sd) - 1``: the spread as a share of the speed (0.02: one start's luck moves it about 2 %)."""
        return math.exp(self.sd) - 1


def pooled_spread(groups: Iterable[Sequence[float]]) -> Spread | None:
    """The pooled standard deviation of ``groups`` (each a sequence of log values that share one mean):

    .. math::

        s^2 = \\frac{\\sum_g \\sum_i (x_{gi} - \\bar x_g)^2}{\\sum_g (n_g - 1)}, \\qquad df = \\sum_g (n_g - 1)

    Groups of fewer than two values carry no spread and are left out; None when no group is left. Each group
    keeps its own mean, so cells of different speeds pool without their differences counting as noise. Between
    starts, a group is one cell's starts (one log median each); within a start, a group is one start's rounds.
    O(total values).
    """
    return pooled_terms(map(group_terms, groups))


def group_terms(group: Sequence[float]) -> tuple[int, float]:
    """One group's share of :func:`pooled_spread`: its size and its squared deviations from its own mean (0 for
    fewer than two values). Kept per start where the values are its rounds (``app.noise.service.round_terms``), so
    the spread within starts sums them without reading any round again. O(len(group))."""
    if len(group) < 2:
        return len(group), 0.0
    mean = math.fsum(group) / len(group)
    return len(group), math.fsum((x - mean) ** 2 for x in group)


def pooled_terms(terms: Iterable[tuple[int, float]]) -> Spread | None:
    """:func:`pooled_spread` from each group's (size, squared deviations) (:func:`group_terms`), summed in order
    as it sums them, so both give the same figure to the last bit. Groups of fewer than two values are left out;
    None when no group is left."""
    squares, df, counted, values = 0.0, 0, 0, 0
    for size, group_squares in terms:
        if size < 2:
            continue
        squares += group_squares
        df += size - 1
        counted += 1
        values += size
    if df == 0:
        return None
    return Spread(math.sqrt(squares / df), df, counted, values)


def fewest_holding(squares: Iterable[float], share: float = 0.5) -> int:
    """The fewest groups whose squared deviations (``group_terms``' second term) hold at least ``share`` of all of
    theirs, the largest taken first: how far a pooled spread rests on a few groups. Of 16 starts whose rounds are
    as spread as one another, about 8 hold half; where two starts each had one round far off the rest (a compile
    inside a round), those 2 hold it, and the pooled figure says more about them than about a start. 0 where the
    total is 0. O(n log n)."""
    ordered = sorted(squares, reverse=True)
    total = math.fsum(ordered)
    if total <= 0:
        return 0
    held = 0.0
    for count, value in enumerate(ordered, 1):
        held += value
        if held >= share * total:
            return count
    return len(ordered)


def uneven_starts(terms: Sequence[tuple[int, float]], *, alpha: float = 0.01) -> bool:
    """Whether one start's rounds spread far beyond the others': Cochran's C test for one outlying variance among
    groups, here with each group's own degrees of freedom. ``terms`` holds each start's (rounds, squared deviations)
    (``group_terms``); with ``df_i = rounds_i - 1``, ``D = sum df_i`` and ``x_i = Q_i / sum Q`` its share, under equal
    spread and normal rounds ``x_i ~ Beta(df_i / 2, (D - df_i) / 2)``, so

    .. math::

        p_i = 1 - I_{x_i}\\left(\\frac{df_i}{2}, \\frac{D - df_i}{2}\\right), \\qquad
        \\text{uneven} \\iff M \\min_i p_i < \\alpha

    (Bonferroni over the ``M`` starts, exact where a share is over one half). False under three starts or without
    spread. Two H200 starts whose first round compiled (shares 0.497 and 0.491 of 10 starts' squares,
    ``tests/noise/test_h200.py``) are uneven;
    starts drawn alike are so in about ``alpha`` of stores (``tests/analysis/test_noise.py``). O(M)."""
    kept = [(size - 1, squares) for size, squares in terms if size >= 2]
    total_df, total = sum(df for df, _ in kept), math.fsum(squares for _, squares in kept)
    if len(kept) < 3 or total <= 0:
        return False
    smallest = min(1 - regularized_beta(squares / total, df / 2, (total_df - df) / 2) for df, squares in kept)
    return len(kept) * smallest < alpha


def paired_aa_spread(differences: Sequence[float]) -> Spread | None:
    """The spread of one pair's log difference when nothing changed, from A/A pairs (both halves of each pair ran
    the same build, back to back): each difference has mean 0, so

    .. math::

        s_p^2 = \\frac{1}{n} \\sum_i d_i^2, \\qquad df = n

    Slow drift of the host moves both halves of a pair and falls out of ``d_i``, where it stays in the spread of
    unpaired starts; None without a pair. O(n).
    """
    if not differences:
        return None
    return Spread(math.sqrt(math.fsum(d * d for d in differences) / len(differences)), len(differences),
                  len(differences), 2 * len(differences))


def log_values(speeds: Iterable[float]) -> list[float]:
    """``ln v`` of each positive speed; zeros and negatives (no speed measured) are left out."""
    return [math.log(v) for v in speeds if v > 0]


def standard_error(spread: Spread, n_base: int, n_head: int) -> float:
    """``se = s sqrt(1/n_b + 1/n_h)``: the standard error of a difference of two means of ``n_b`` and ``n_h`` starts."""
    return spread.sd * math.sqrt(1 / n_base + 1 / n_head)


def min_detectable_effect(spread: Spread, n_base: int, n_head: int, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest relative change that a comparison of ``n_base`` and ``n_head`` new starts will find with
    probability ``power`` at a two-sided ``alpha``: :func:`detectable` of :func:`standard_error` on

    .. math::

        df' = df + (n_b - 1) + (n_h - 1)

    since the comparison's own starts join the class's pool (each build's cell with two or more starts is an A/A
    group), and its verdict stands on the pool as it is then. Read with ``spread.df`` alone, a class learned from
    two starts (df 1, ``t_{1, 0.975}`` = 12.7) priced 3 starts a side at a 7.1-fold change (an H100 serving class,
    2026-12-05), where those starts bring the verdict's ``df`` to 5 and about a 63 % change.
    """
    df = spread.df + (n_base - 1) + (n_head - 1)
    return detectable(standard_error(spread, n_base, n_head), df, alpha=alpha, power=power)


def detectable(se: float, df: int, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest relative change an estimate of standard error ``se`` (log scale, ``df`` degrees of freedom) finds
    with probability ``power`` at a two-sided ``alpha``:

    .. math::

        MDE = \\exp\\big((t_{df, 1 - \\alpha/2} + t_{df, power})\\, se\\big) - 1

    (0.05: a 5 % change is found four times in five at 80 %).
    """
    return math.exp((t_quantile(1 - alpha / 2, df) + t_quantile(power, df)) * se) - 1


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom, by bisection on :func:`t_cdf` to 1e-12
    (about 80 steps; kept, as a compare table asks for the same few levels and degrees of freedom for every cell).
    Raises ValueError unless ``0 < p < 1`` and ``df >= 1``."""
    if not 0 < p < 1 or df < 1:
        raise ValueError(f"need 0 < p < 1 and df >= 1, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2
    while high - low > 1e-12 * max(1.0, high):
        mid = (low + high) / 2
        low, high = (mid, high) if t_cdf(mid, df) < p else (low, mid)
    return (low + high) / 2


def t_cdf(t: float, df: int) -> float:
    """Student's t distribution function: for ``t >= 0``, ``1 - I_{df / (df + t^2)}(df/2, 1/2) / 2``, with ``I``
    the regularized incomplete beta function; symmetric for ``t < 0``."""
    tail = regularized_beta(df / (df + t * t), df / 2, 0.5) / 2
    return 1 - tail if t >= 0 else tail


def regularized_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)`` by its continued fraction (Lentz's method), taken
    on the side where it converges fast (``x < (a + 1) / (a + b + 2)``, else ``1 - I_{1-x}(b, a)``); Numerical
    Recipes, 3rd ed., section 6.4."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1 - regularized_beta(1 - x, b, a)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    return front * _beta_fraction(x, a, b)


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    value = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            value *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return value
