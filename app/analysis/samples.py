"""What the verdicts read from a cell's results: each repeat's tokens/s and the summed spec-decode counters."""

from collections.abc import Sequence

from app.analysis.verdicts import CellSample
from app.schemas.cell import CellResult


def pooled(results: Sequence[CellResult]) -> CellSample:
    """The repeats of one cell on one build as one sample.

    Tokens/s is one value per repeat, its ``tokens_per_s`` (the median of its rounds): the engine start is
    the unit, since rounds of one start share its luck (``app.analysis.verdicts``). The counters are summed,
    and ``accepted_per_position`` position by position over the repeats that report it. Raises ValueError
    without results.
    """
    if not results:
        raise ValueError("no results to pool")
    tokens_per_s: list[float] = []
    drafts = draft_tokens = accepted = 0
    per_position: list[int] = []
    for result in results:
        tokens_per_s.append(result.tokens_per_s)
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
