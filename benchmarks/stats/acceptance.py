"""Whether a cell's passes drew anew or replayed one another's random draws, from its rounds' counters.

Pure functions. The service stores every pass's counts as trials (``app.analysis.acceptance``); this is how
the H200 report found the calibration cells whose passes replayed the first one's draws.
"""

from collections.abc import Sequence

from app.schemas.cell import SpecDecodeCounters


def per_pass_counts(rounds: Sequence[tuple[int, SpecDecodeCounters]], pass_requests: int) -> list[tuple[int, ...]]:
    """Each round's ``(drafts, A_0, A_1, ...)`` divided by its passes, where the division is exact; else
    the round's raw counts.

    ``rounds`` holds ``(requests, counters)`` per round and a pass is ``pass_requests`` requests, so a
    round ran ``requests // pass_requests`` passes. Passes that replayed one another's random draws
    (the same request seeds at temperature > 0) leave one tuple repeated in every round: then only one
    pass's counts are independent trials.
    """
    found = []
    for requests, counters in rounds:
        passes = max(requests // pass_requests, 1)
        counts = (counters.num_drafts, *counters.accepted_per_position)
        found.append(tuple(c // passes for c in counts) if all(c % passes == 0 for c in counts) else counts)
    return found
