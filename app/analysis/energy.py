"""Tokens per joule over a start's measured rounds: the median and its interval, as tokens/s has them.

Pure functions, standard library only. A round's joules are what its GPUs' energy counters rose by across it
(``runners/cellkit.EnergyMeter``, summed over a tensor-parallel cell's GPUs).
"""

from collections.abc import Sequence

from app.analysis.rounds import MedianInterval, median_interval


def tokens_per_joule(rounds: Sequence[tuple[int, float | None]]) -> MedianInterval | None:
    """Each round's ``t_i / E_i`` (output tokens over joules), their median and the order-statistic interval of
    ``median_interval`` (five rounds: their range, at 93.75 %), the level ``interval_rank(n)`` tells back.

    ``rounds``: ``(output tokens, joules)`` per round. None unless every round has joules above 0: a start whose
    meter failed part-way, or whose counter did not tick over a round, has no tokens/J rather than one over the
    rounds that happened to read. O(n log n).
    """
    if not rounds or any(joules is None or joules <= 0 for _, joules in rounds):
        return None
    return median_interval([tokens / joules for tokens, joules in rounds])  # type: ignore[operator]
