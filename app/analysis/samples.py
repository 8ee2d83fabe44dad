"""What the verdicts read from a cell's results: every round's tokens/s and the summed spec-decode counters."""

from collections.abc import Sequence

from app.analysis.verdicts import CellSample
from app.schemas.cell import CellResult


def pooled(results: Sequence[CellResult]) -> CellSample:
    """The repeats of one cell on one build as one sample.

    Tokens/s of each round is ``output_tokens / seconds`` (a result without rounds counts as one round
    at its ``tokens_per_s``); the counters are summed, and ``accepted_per_position`` position by
    position over the repeats that report it. Raises ValueError without results.
    """
    if not results:
        raise ValueError("no results to pool")
    tokens_per_s: list[float] = []
    drafts = draft_tokens = accepted = 0
    per_position: list[int] = []
    for result in results:
        rounds = [r.output_tokens / r.seconds for r in result.rounds if r.seconds > 0]
        tokens_per_s += rounds or [result.tokens_per_s]
        counters = result.spec_decode
        if counters is None:
            continue
        drafts += counters.num_drafts
        draft_tokens += counters.num_draft_tokens
        accepted += counters.num_accepted_tokens
        per_position += [0] * (len(counters.accepted_per_position) - len(per_position))
        for i, count in enumerate(counters.accepted_per_position):
            per_position[i] += count
    return CellSample(tokens_per_s, drafts, draft_tokens, accepted, tuple(per_position))
