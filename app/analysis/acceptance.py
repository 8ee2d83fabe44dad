"""Speculative-decoding metrics derived from vLLM's counters, by vLLM's own formulas, with intervals.

Pure functions of the cell's reported numbers: nothing here reads the database or the web layer.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from app.analysis.intervals import Z_95, wilson_interval


class SpecDecodeCounters(Protocol):
    """vLLM's spec-decode counters over a run or a round (``app.schemas.cell.SpecDecodeCounters``)."""

    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_position: list[int]


class MeasuredRequest(Protocol):
    """One request's own drafts and accepted tokens, where it reported them (``app.schemas.cell.MeasuredRequest``)."""

    num_drafts: int | None
    num_accepted_tokens: int | None


@dataclass(frozen=True)
class AcceptanceMetrics:
    """Point estimates and 95 % intervals; every field is None (``per_position`` empty) without drafts.

    ``per_position[i]`` is ``(rate, low, high)`` for draft position ``i``. Every interval holds its
    estimate: both come from the same counts.
    """

    acceptance_rate: float | None
    acceptance_rate_low: float | None
    acceptance_rate_high: float | None
    mean_acceptance_length: float | None
    mean_acceptance_length_low: float | None
    mean_acceptance_length_high: float | None
    per_position: tuple[tuple[float, float, float], ...]


NO_DRAFTS = AcceptanceMetrics(None, None, None, None, None, None, ())


def derive(
    counters: SpecDecodeCounters | None,
    requests: Sequence[MeasuredRequest],
    rounds: Sequence[SpecDecodeCounters] = (),
) -> AcceptanceMetrics:
    """Acceptance rate, mean acceptance length and per-position rates of one measured run.

    With ``D`` drafts, ``T`` draft tokens, ``A`` accepted tokens and ``A_i`` accepted at
    position ``i`` (vLLM's ``spec_decode_*`` counters):

    - acceptance rate ``A / T``, Wilson interval with ``A`` successes in ``T`` trials (a Wilson
      interval always holds its own ``A / T``);
    - mean acceptance length ``L = 1 + A / D`` (the bonus token counts), interval ``L +- z se``
      clipped to ``[1, 1 + k]``, where ``se`` is the larger of
      (a) the per-draft standard error from the same counters: a draft accepts ``X`` tokens with
      ``P(X >= i) = A_i / D``, so ``E[X] = A / D`` and ``E[X^2] = sum_i (2i - 1) A_i / D``,
      ``se_a = sqrt(Var(X) / D)``; and
      (b) the cluster standard error of the ratio over units that draft together: the measured
      rounds (2 or more) or else the requests (when each reported its own drafts), from the
      ratio estimator's linearisation ``se_b^2 = n / (n - 1) sum_u (a_u - R d_u)^2 / D^2``
      with ``R = A / D``;
      drafts of one request are not independent, so (a) alone is too narrow, and (b) alone can
      be too narrow with few units;
    - per-position rate ``A_i / D``, Wilson interval with ``A_i`` successes in ``D`` trials.

    The point estimates come from the counters; when the per-request or per-round counts do not
    add up to them (a warm-up leak, a lost request), those units are not used for (b).

    Parameters
    ----------
    counters : SpecDecodeCounters or None
        None for a run without speculation.
    requests : sequence of MeasuredRequest
        The measured requests, in any order.
    rounds : sequence of SpecDecodeCounters
        Each measured round's counters (they sum to ``counters``).

    Returns
    -------
    AcceptanceMetrics
        :data:`NO_DRAFTS` when ``counters`` is None or counts no drafts.

    Raises
    ------
    ValueError
        On inconsistent counters (more accepted than drafted).

    Notes
    -----
    O(P + U) for P positions and U units. Cochran, W. G. (1977), *Sampling Techniques*, 3rd ed.,
    sec. 6.4 (the ratio estimator's variance).
    """
    if counters is None or counters.num_drafts == 0:
        return NO_DRAFTS
    drafts = counters.num_drafts
    accepted = counters.num_accepted_tokens
    rate_low, rate_high = wilson_interval(accepted, counters.num_draft_tokens)
    length, length_low, length_high = acceptance_length(counters, _cluster_se(counters, requests, rounds))
    return AcceptanceMetrics(
        acceptance_rate=accepted / counters.num_draft_tokens,
        acceptance_rate_low=rate_low,
        acceptance_rate_high=rate_high,
        mean_acceptance_length=length,
        mean_acceptance_length_low=length_low,
        mean_acceptance_length_high=length_high,
        per_position=per_position(counters.accepted_per_position, drafts),
    )


def acceptance_length(counters: SpecDecodeCounters, cluster_se: float = 0.0) -> tuple[float, float, float]:
    """``(L, low, high)``: ``L = 1 + A / D`` and ``L +- z max(se_a, cluster_se)`` clipped to ``[1, 1 + k]``, with
    ``se_a`` the per-draft standard error of :func:`derive` and ``cluster_se`` a cluster standard error of ``A / D``
    (:func:`cluster_ratio_se`; 0 without one). ``counters`` must count at least one draft. O(k)."""
    drafts = counters.num_drafts
    length = 1.0 + counters.num_accepted_tokens / drafts
    depth = len(counters.accepted_per_position) or max(1, counters.num_draft_tokens // drafts)
    half = Z_95 * max(_per_draft_se(counters), cluster_se)
    return length, max(1.0, length - half), min(1.0 + depth, length + half)


def cluster_ratio_se(n: int, total_y: float, total_x: float, sum_yy: float, sum_xy: float, sum_xx: float) -> float:
    """Cluster standard error of the ratio ``R = Y / X`` over ``n`` units ``(y_u, x_u)``, from their sums alone.

    The ratio estimator's linearisation: ``se^2 = n / (n - 1) sum_u (y_u - R x_u)^2 / X^2``, where
    ``sum_u (y_u - R x_u)^2 = sum y^2 - 2 R sum x y + R^2 sum x^2`` (so the sums ``Y``, ``X``, ``sum y^2``,
    ``sum x y``, ``sum x^2`` are enough, and sums of several runs pool by adding). 0 when ``n < 2`` or ``X <= 0``
    (no spread to estimate); a residual sum that rounding took below 0 counts as 0. O(1). Cochran (1977),
    *Sampling Techniques*, sec. 6.4.
    """
    if n < 2 or total_x <= 0:
        return 0.0
    ratio = total_y / total_x
    residuals = max(0.0, sum_yy - 2 * ratio * sum_xy + ratio * ratio * sum_xx)
    return math.sqrt(n / (n - 1) * residuals) / total_x


def per_position(accepted_per_position: Sequence[int], drafts: int) -> tuple[tuple[float, float, float], ...]:
    """``(A_i / D, low, high)`` for each draft position ``i``: Wilson with ``A_i`` successes in ``D`` trials.

    Empty without drafts. Raises ValueError if a position accepted more than ``D``.
    """
    if drafts == 0:
        return ()
    return tuple((at / drafts, *wilson_interval(at, drafts)) for at in accepted_per_position)


def speedup(tokens_per_s: float, baseline_tokens_per_s: float) -> float:
    """Throughput ratio ``tokens_per_s / baseline_tokens_per_s``; above 1 means speculation helped.

    Raises
    ------
    ValueError
        If the baseline is not positive.
    """
    if baseline_tokens_per_s <= 0:
        raise ValueError(f"baseline throughput must be positive, got {baseline_tokens_per_s}")
    return tokens_per_s / baseline_tokens_per_s


def lossless_share(fingerprints: Sequence[str], baseline_fingerprints: Sequence[str]) -> float:
    """Share of requests whose greedy output equals the baseline's: ``(1/n) sum_i [f_i == b_i]``.

    Requests are paired by position, so both runs must list the same prompts in the same order.
    At temperature 0 speculative decoding is meant to be lossless: anything below 1 is a finding
    (or batch non-invariance; see ``VLLM_BATCH_INVARIANT``).

    Raises
    ------
    ValueError
        If the lengths differ or both are empty.
    """
    if len(fingerprints) != len(baseline_fingerprints):
        raise ValueError(f"{len(fingerprints)} outputs against {len(baseline_fingerprints)} baseline outputs")
    if not fingerprints:
        raise ValueError("no outputs to compare")
    same = sum(f == b for f, b in zip(fingerprints, baseline_fingerprints, strict=True))
    return same / len(fingerprints)


def _per_draft_se(counters: SpecDecodeCounters) -> float:
    """Standard error of the mean accepted tokens per draft, treating drafts as independent (see ``derive``)."""
    drafts = counters.num_drafts
    mean = counters.num_accepted_tokens / drafts
    if not counters.accepted_per_position:
        return 0.0
    second = sum((2 * i - 1) * at for i, at in enumerate(counters.accepted_per_position, start=1)) / drafts
    return math.sqrt(max(0.0, second - mean * mean) / drafts)


def _cluster_se(
    counters: SpecDecodeCounters, requests: Sequence[MeasuredRequest], rounds: Sequence[SpecDecodeCounters]
) -> float:
    """Standard error of ``A / D`` over rounds (2 or more) or requests that add up to the counters; else 0."""
    units = [(r.num_accepted_tokens, r.num_drafts) for r in rounds] if len(rounds) >= 2 else []
    if not units and requests and all(r.num_drafts is not None and r.num_accepted_tokens is not None for r in requests):
        units = [(r.num_accepted_tokens, r.num_drafts) for r in requests]
    if sum(a for a, _ in units) != counters.num_accepted_tokens or sum(d for _, d in units) != counters.num_drafts:
        return 0.0
    return cluster_ratio_se(len(units), counters.num_accepted_tokens, counters.num_drafts,
                            sum(a * a for a, _ in units), sum(a * d for a, d in units), sum(d * d for _, d in units))


def calibration_misses(
    expected: Sequence[float], measured: Sequence[tuple[float, float, float]]
) -> tuple[bool, ...]:
    """For a calibration cell (synthetic acceptance at known rates): whether each position's interval misses
    its expected rate.

    ``expected[i]`` is vLLM's ``synthetic_acceptance_rates[i]``, the probability that the first
    ``i + 1`` draft tokens are all accepted, which is what ``A_i / D`` estimates; ``measured[i]`` is
    ``(rate, low, high)`` from :func:`per_position`. A miss is ``expected[i]`` outside ``[low, high]``;
    with 95 % intervals about one position in twenty misses by chance. A position missing from either
    side is a miss (the cell did not measure what was asked).
    """
    size = max(len(expected), len(measured))
    misses = []
    for i in range(size):
        if i >= len(expected) or i >= len(measured):
            misses.append(True)
            continue
        _, low, high = measured[i]
        misses.append(not low <= expected[i] <= high)
    return tuple(misses)
