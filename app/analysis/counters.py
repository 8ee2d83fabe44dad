"""Whether vLLM's spec-decode counters of one run agree with each other: a counting bug in vLLM is a finding.

Pure functions of the stored counts: nothing here reads the database or the web layer.
"""

from collections.abc import Sequence
from itertools import pairwise
from typing import Protocol

from app.analysis.request_acceptance import RequestAcceptance, request_problems

# Proposers whose drafts may hold fewer than k tokens: an n-gram match near the end of the context proposes what is
# left of it (vLLM's ``ngram_proposer``: ``tokens[start:start + k]``), suffix decoding proposes what its tree holds.
# tests/data/aa-cpu (real vLLM 0.32, ngram k=3): 182 draft tokens in 84 drafts, not 252.
SHORT_DRAFTS = frozenset({"ngram", "ngram_gpu", "suffix"})


class Counters(Protocol):
    """vLLM's spec-decode counters over a run (``app.schemas.cell.SpecDecodeCounters``, a stored ``Result``)."""

    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_position: Sequence[int]


def counter_problems(
    counters: Counters, *, k: int | None, method: str | None = None, requests: RequestAcceptance | None = None
) -> list[str]:
    """The rules that ``counters`` break, each as a short sentence with its numbers; empty when they agree.

    With ``D`` drafts, ``T`` draft tokens, ``A`` accepted tokens, ``A_i`` accepted at position ``i`` (1 first) and
    ``k`` the cell's ``num_speculative_tokens``, vLLM counts a draft that accepted ``x`` tokens once in ``D``, adds
    ``x`` to ``A`` and 1 to each of ``A_1 .. A_x`` (``SpecDecodingStats.observe_draft``). Hence:

    1. ``A_1 >= A_2 >= ... >= A_k``: position ``i + 1`` is accepted only if position ``i`` was;
    2. ``sum_i A_i = A``: each accepted token is counted at exactly one position;
    3. ``T = D k`` (a draft proposes ``k`` tokens; ``D <= T <= D k`` for the proposers of ``SHORT_DRAFTS``, whose
       drafts may be shorter), at most ``k`` positions, and ``A_i <= D`` at every position.

    What follows, and from which rule:

    - from 2, mean acceptance length ``L = 1 + A / D = 1 + sum_i A_i / D``: one plus the sum of the per-position
      rates, the identity the pages' per-position rates and their mean acceptance length share;
    - from 1 and 3, each rate ``A_i / D`` lies in [0, 1] and they fall with ``i``: ``A_i / D`` is
      ``P(X >= i)`` for the tokens ``X`` a draft accepted, so ``sum_i A_i / D = E[X]`` is a mean, not only a sum;
    - from 2 and 3's ``T = D k``, the acceptance rate ``A / T`` is the mean of the ``k`` per-position rates
      (``L = 1 + k A / T``), and ``A <= T``.

    Where the cell reported each request's counters (``requests``, their sums), also
    ``app.analysis.request_acceptance.request_problems``: no request accepts more than it drafted, and the requests
    add up to the run's counters.

    Not checked: counters with no drafts (nothing was counted), rule 3's ``k`` parts when ``k`` is unknown (None),
    and rules 1 and 2 when no position was counted (an empty ``accepted_per_position``, as a cell that could not read
    vLLM's per-position counter reports it). Raises nothing; O(k).

    Parameters
    ----------
    counters : Counters
        One run's counters, or a stored result's.
    k : int or None
        The cell's ``num_speculative_tokens``; None when the cell spec does not say.
    method : str or None
        The speculative method; those of ``SHORT_DRAFTS`` may draft fewer than ``k`` tokens.
    requests : RequestAcceptance or None
        The requests' counters as a result keeps them; None where they were not recorded.
    """
    drafts, tokens, accepted = counters.num_drafts, counters.num_draft_tokens, counters.num_accepted_tokens
    positions = list(counters.accepted_per_position or [])
    problems = request_problems(requests, counters) if requests is not None else []
    if not drafts and not tokens and not accepted and not any(positions):
        return problems
    for i, (this, after) in enumerate(pairwise(positions), start=1):
        if after > this:
            problems.append(f"position {i + 1} accepted {after} > position {i}'s {this}")
    if positions and sum(positions) != accepted:
        problems.append(f"positions accepted {sum(positions)} in all, not the {accepted} accepted tokens")
    if k:
        if method in SHORT_DRAFTS:
            if not drafts <= tokens <= drafts * k:
                problems.append(f"{tokens} draft tokens outside {drafts} drafts x 1 to {k} (k) = {drafts} to {drafts * k}")
        elif tokens != drafts * k:
            problems.append(f"{tokens} draft tokens, not {drafts} drafts x {k} (k) = {drafts * k}")
        if len(positions) > k:
            problems.append(f"{len(positions)} positions counted, more than k = {k}")
    problems.extend(f"position {i} accepted {at} > the {drafts} drafts" for i, at in enumerate(positions, start=1) if at > drafts)
    return problems
