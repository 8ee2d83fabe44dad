"""How speculation's speedup moves with load: the best draft length k at each load, where speculation stops
paying (break-even), and the speedup the spec-decode counters predict.

Pure functions, standard library only. A load ``x`` is the clients at once of a serving cell or the batch size of
an offline one (requests in flight); a speedup is a cell's tokens/s over its baseline's with the interval
``app.analysis.fallback.ratio`` gives it (the pooled starts' spread, 95 %). Nothing here reads how the points
were measured: a point without an interval is never "surely" above or below 1.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class Point:
    """A speedup at load ``x`` (``low``/``high``: its 95 % interval, None when it has none)."""

    x: int
    value: float
    low: float | None = None
    high: float | None = None

    @property
    def above(self) -> bool:
        """The interval lies wholly above 1: speculation surely pays here."""
        return self.low is not None and self.low > 1.0

    @property
    def below(self) -> bool:
        """The interval lies wholly below 1: speculation surely costs here."""
        return self.high is not None and self.high < 1.0


@dataclass(frozen=True)
class BestK:
    """The draft length with the highest speedup at one load, the others whose interval overlaps its own, and how many
    k were measured there (1: the best is the only one, not the best of several)."""

    k: int
    speedup: Point
    within_noise: tuple[int, ...]
    measured: int


def best_k(speedups: dict[int, Point]) -> BestK | None:
    """The k with the highest point speedup among ``speedups`` (k -> its speedup at one load; ties to the smaller
    k, which drafts less), and every other k whose interval overlaps the best's (``low_j <= high_best`` and
    ``low_best <= high_j``): a reader cannot tell those from the best. A point without an interval overlaps
    whatever interval holds its value, so a best without an interval has every k whose interval holds the best's
    value within noise. None for no k. O(n)."""
    if not speedups:
        return None
    k = min(speedups, key=lambda j: (-speedups[j].value, j))
    best = speedups[k]
    return BestK(k, best, tuple(j for j in sorted(speedups) if j != k and _overlap(best, speedups[j])), len(speedups))


def _overlap(a: Point, b: Point) -> bool:
    a_low, a_high = (a.low, a.high) if a.low is not None and a.high is not None else (a.value, a.value)
    b_low, b_high = (b.low, b.high) if b.low is not None and b.high is not None else (b.value, b.value)
    return a_low <= b_high and b_low <= a_high


class Pays(StrEnum):
    EVERYWHERE = "everywhere"  # every interval wholly above 1
    NOWHERE = "nowhere"  # every interval wholly below 1
    UP_TO = "up_to"  # the points cross 1 from above: speculation pays up to a load
    UNDECIDED = "undecided"  # the intervals do not say


@dataclass(frozen=True)
class BreakEven:
    """Where speculation stops paying along one line of loads: ``x`` the point estimate (``UP_TO`` only), ``low``
    and ``high`` its interval's ends (None: open on that side, beyond the loads measured), ``why`` for
    ``UNDECIDED``."""

    pays: Pays
    x: float | None = None
    low: int | None = None
    high: int | None = None
    why: str = ""


def break_even(points: Sequence[Point]) -> BreakEven | None:
    """Where the speedup crosses 1, with an interval, over ``points`` of one line (one per load).

    Sorted by load ``x``:

    - every interval wholly above 1: ``EVERYWHERE``; every one wholly below: ``NOWHERE``;
    - the first point at or above 1 and some later one below: ``UP_TO``. With ``(x_1, s_1)`` the last point at or
      above 1 before the first below, ``(x_2, s_2)``, the estimate interpolates on log load:
      ``x* = exp(ln x_1 + (s_1 - 1) / (s_1 - s_2) (ln x_2 - ln x_1))``. Its interval is
      ``[the largest x whose interval lies wholly above 1, the smallest x whose interval lies wholly below 1]``:
      ``high`` the smallest x with ``high_x < 1``, ``low`` the largest x under ``high`` with ``low_x > 1``;
      either is None when no point qualifies (the break-even may lie beyond the loads measured);
    - otherwise ``UNDECIDED``, ``why`` saying what the points show (all above 1 but some interval holds 1, all below
      but some holds 1, or below 1 at the fewest loads and at or above 1 at some other: the loads below and above,
      and those whose interval holds 1, since the points may cross 1 more than once).

    None for no points. O(n log n).
    """
    if not points:
        return None
    ordered = sorted(points, key=lambda p: p.x)
    if all(p.above for p in ordered):
        return BreakEven(Pays.EVERYWHERE)
    if all(p.below for p in ordered):
        return BreakEven(Pays.NOWHERE)
    first_below = next((i for i, p in enumerate(ordered) if p.value < 1.0), None)
    if first_below is None:
        held = _holding([p for p in ordered if not p.above])
        return BreakEven(Pays.UNDECIDED, why=f"above 1 at every load measured, but {held}")
    if first_below == 0:
        if all(p.value < 1.0 for p in ordered):
            held = _holding([p for p in ordered if not p.below])
            return BreakEven(Pays.UNDECIDED, why=f"below 1 at every load measured, but {held}")
        # Below 1 first, then above at some load: it may cross back (below again at more), so say where each lies.
        below = _loads(p for p in ordered if p.value < 1.0)
        above = _loads(p for p in ordered if p.value >= 1.0)
        held = [p for p in ordered if not p.above and not p.below]
        holds = f"; {_holding(held)}" if held else ""
        return BreakEven(Pays.UNDECIDED, why=f"below 1 at {below} and at or above 1 at {above}{holds}")
    one, two = ordered[first_below - 1], ordered[first_below]
    share = (one.value - 1.0) / (one.value - two.value)
    x = math.exp(math.log(one.x) + share * (math.log(two.x) - math.log(one.x)))
    high = next((p.x for p in ordered if p.below), None)
    low = max((p.x for p in ordered if p.above and (high is None or p.x < high)), default=None)
    return BreakEven(Pays.UP_TO, x, low, high)


def _loads(points: Iterable[Point]) -> str:
    """Loads as a reader lists them: ``1``, ``1 and 4``, ``1, 4 and 64``."""
    xs = [str(p.x) for p in points]
    return xs[0] if len(xs) == 1 else f"{', '.join(xs[:-1])} and {xs[-1]}" if xs else ""


def _holding(points: Sequence[Point]) -> str:
    """``the interval at 4 holds 1``, ``the intervals at 1 and 16 hold 1``: the loads whose interval holds 1."""
    return f"the interval at {_loads(points)} holds 1" if len(points) == 1 else f"the intervals at {_loads(points)} hold 1"


def acceptance_length(accepted_per_position: Sequence[int], drafts: int) -> float:
    """Tokens a step makes per request: ``tau = 1 + sum_i A_i / D`` (vLLM's mean acceptance length, the per-position
    rates summed); 1 without drafts (no speculation). O(k)."""
    return 1.0 + (sum(accepted_per_position) / drafts if drafts else 0.0)


def step_time(*, tau: float, tokens_per_s: float | None = None, in_flight: int | None = None,
              tpot: float | None = None) -> float:
    """A step's time under the counters' model: offline ``T = in_flight x tau / tokens_per_s`` (every request in
    flight makes ``tau`` tokens a step), serving ``T = TPOT x tau`` (a request's time per output token times the
    tokens it makes a step). Give ``tpot``, or ``tokens_per_s`` with ``in_flight``. O(1)."""
    if tpot is not None:
        return tpot * tau
    if tokens_per_s is None or in_flight is None or tokens_per_s <= 0:
        raise ValueError("a step's time needs tpot, or tokens_per_s > 0 with in_flight")
    return in_flight * tau / tokens_per_s


@dataclass(frozen=True)
class StepCosts:
    """``T(k) = verify + k x draft``, fitted over ``ks`` draft lengths of one line at one load."""

    verify: float
    draft: float
    ks: int

    def at(self, k: int) -> float:
        return self.verify + k * self.draft


def fit_step_costs(times: dict[int, float]) -> StepCosts | None:
    """Least squares of ``T(k) = c_verify + k c_draft`` over ``times`` (k -> a step's time):
    ``c_draft = sum (k - kbar)(T - Tbar) / sum (k - kbar)^2``, ``c_verify = Tbar - c_draft kbar``. None with fewer than
    two distinct k: one k cannot part verifying from drafting. O(n)."""
    if len(times) < 2:
        return None
    ks = list(times)
    k_mean = sum(ks) / len(ks)
    t_mean = sum(times.values()) / len(ks)
    draft = sum((k - k_mean) * (t - t_mean) for k, t in times.items()) / sum((k - k_mean) ** 2 for k in ks)
    return StepCosts(t_mean - draft * k_mean, draft, len(ks))


@dataclass(frozen=True)
class Prediction:
    """The speedup the counters predict for one k (None without a fit), and whether the measured one's interval
    misses it (``off``)."""

    k: int
    tau: float
    predicted: float | None
    off: bool


def predicted_speedups(*, taus: dict[int, float], times: dict[int, float], baseline_time: float,
                       measured: dict[int, Point]) -> dict[int, Prediction]:
    """Per k at one load, the speedup the counters predict: ``tau(k) x T0 / T_fit(k)``, with ``T_fit`` the least
    squares line of :func:`fit_step_costs` over ``times`` (k -> the step time of :func:`step_time`) and ``T0`` the
    baseline's step time (``tau = 1``). It holds when a step costs a verification plus ``k`` draft steps; a cell
    whose speed does not follow its acceptance (a draft run eagerly, a graph-mode fallback) leaves the line.
    ``off`` when the measured speedup's interval (``measured[k]``) excludes the prediction. With one k (or a fitted
    time not above 0) the prediction is None. O(n)."""
    costs = fit_step_costs(times)
    found = {}
    for k, tau in taus.items():
        fitted = costs.at(k) if costs is not None else None
        predicted = tau * baseline_time / fitted if fitted is not None and fitted > 0 else None
        point = measured.get(k)
        off = (predicted is not None and point is not None and point.low is not None and point.high is not None
               and not point.low <= predicted <= point.high)
        found[k] = Prediction(k, tau, predicted, off)
    return found
