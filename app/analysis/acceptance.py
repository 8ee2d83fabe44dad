"""Speculative-decoding metrics derived from vLLM's counters, by vLLM's own formulas, with intervals.

Pure functions of the cell's reported numbers: nothing here reads the database or the web layer.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from app.analysis.intervals import bootstrap_ratio_interval, wilson_interval
from app.schemas.cell import RequestOutcome, SpecDecodeCounters


@dataclass(frozen=True)
class AcceptanceMetrics:
    """Point estimates and 95 % intervals; every field is None (``per_position`` empty) without drafts.

    ``per_position[i]`` is ``(rate, low, high)`` for draft position ``i``.
    ``mean_acceptance_length_low/high`` are None unless every request reported its own
    ``num_drafts`` and ``num_accepted_tokens``.
    """

    acceptance_rate: float | None
    acceptance_rate_low: float | None
    acceptance_rate_high: float | None
    mean_acceptance_length: float | None
    mean_acceptance_length_low: float | None
    mean_acceptance_length_high: float | None
    per_position: tuple[tuple[float, float, float], ...]


NO_DRAFTS = AcceptanceMetrics(None, None, None, None, None, None, ())


def derive(counters: SpecDecodeCounters | None, requests: Sequence[RequestOutcome]) -> AcceptanceMetrics:
    """Acceptance rate, mean acceptance length and per-position rates of one measured run.

    With ``D`` drafts, ``T`` draft tokens, ``A`` accepted tokens and ``A_i`` accepted at
    position ``i`` (vLLM's ``spec_decode_*`` counters):

    - acceptance rate ``A / T``, Wilson interval with ``A`` successes in ``T`` trials;
    - mean acceptance length ``1 + A / D`` (the bonus token counts), interval ``1 +`` the
      percentile bootstrap of ``sum(a_r) / sum(d_r)`` over requests ``r``
      (:func:`~app.analysis.intervals.bootstrap_ratio_interval`, 2000 resamples, seed 0);
    - per-position rate ``A_i / D``, Wilson interval with ``A_i`` successes in ``D`` trials.

    The Wilson intervals treat tokens as independent trials; a draft stops at its first
    rejection, so they are narrower than the truth. The bootstrap resamples whole requests and
    carries that dependence. The point estimates come from the counters, the bootstrap from the
    per-request numbers: if those disagree, the point can fall outside its interval.

    Parameters
    ----------
    counters : SpecDecodeCounters or None
        None for a run without speculation.
    requests : sequence of RequestOutcome
        The measured requests, in any order.

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
    O(P + B R) for P positions, B resamples and R requests.
    """
    if counters is None or counters.num_drafts == 0:
        return NO_DRAFTS
    drafts = counters.num_drafts
    accepted = counters.num_accepted_tokens
    rate_low, rate_high = wilson_interval(accepted, counters.num_draft_tokens)
    length_low, length_high = _length_interval(requests)
    return AcceptanceMetrics(
        acceptance_rate=accepted / counters.num_draft_tokens,
        acceptance_rate_low=rate_low,
        acceptance_rate_high=rate_high,
        mean_acceptance_length=1.0 + accepted / drafts,
        mean_acceptance_length_low=length_low,
        mean_acceptance_length_high=length_high,
        per_position=per_position(counters.accepted_per_position, drafts),
    )


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


def _length_interval(requests: Sequence[RequestOutcome]) -> tuple[float | None, float | None]:
    """``1 +`` the bootstrap interval of accepted/drafts over requests; Nones when it cannot be had."""
    if not requests or any(r.num_drafts is None or r.num_accepted_tokens is None for r in requests):
        return None, None
    drafts = [r.num_drafts for r in requests]
    if sum(drafts) == 0:
        return None, None
    low, high = bootstrap_ratio_interval([r.num_accepted_tokens for r in requests], drafts)
    return 1.0 + low, 1.0 + high
