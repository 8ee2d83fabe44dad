"""Each round's counts per pass: one tuple in every round when the passes replayed one another's draws."""

from app.schemas.cell import SpecDecodeCounters
from benchmarks.stats.acceptance import per_pass_counts


def test_per_pass_counts_divides_each_round_by_its_passes_where_exact() -> None:
    def counters(drafts: int, *accepted: int) -> SpecDecodeCounters:
        return SpecDecodeCounters(num_drafts=drafts, num_draft_tokens=3 * drafts,
                                  num_accepted_tokens=sum(accepted), accepted_per_position=list(accepted))

    # 8 requests a pass: rounds of 3 and 2 passes replaying one pass (10 drafts, 8/5/3 accepted) ...
    replayed = [(24, counters(30, 24, 15, 9)), (16, counters(20, 16, 10, 6))]
    assert per_pass_counts(replayed, 8) == [(10, 8, 5, 3), (10, 8, 5, 3)]
    # ... and a round of 2 passes whose counts do not split evenly keeps its raw counts.
    assert per_pass_counts([(16, counters(21, 16, 10, 6))], 8) == [(21, 16, 10, 6)]
