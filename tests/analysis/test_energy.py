"""app/analysis/energy.py: tokens per joule over a start's rounds, hand-computed."""

import pytest

from app.analysis.energy import tokens_per_joule


def test_the_median_of_the_rounds_tokens_per_joule_and_their_range_at_five_rounds() -> None:
    # Per round: 1000/500 = 2.0, 1200/400 = 3.0, 900/600 = 1.5, 1000/400 = 2.5, 1100/500 = 2.2 tokens/J.
    found = tokens_per_joule([(1000, 500.0), (1200, 400.0), (900, 600.0), (1000, 400.0), (1100, 500.0)])
    assert found is not None
    assert found.median == 2.2
    # Five rounds: [x_(1), x_(5)] at C = 1 - 2 (1/32) = 0.9375.
    assert (found.low, found.high, found.confidence, found.n) == (1.5, 3.0, 0.9375, 5)


def test_one_round_has_a_value_and_no_interval() -> None:
    found = tokens_per_joule([(300, 200.0)])
    assert found is not None and (found.median, found.low, found.high) == (1.5, None, None)


@pytest.mark.parametrize("rounds", [
    [],
    [(1000, 500.0), (1000, None)],  # the meter failed at the second round
    [(1000, 500.0), (1000, 0.0)],  # the counter did not move over a round
])
def test_a_start_without_every_rounds_joules_has_no_tokens_per_joule(rounds: list) -> None:
    assert tokens_per_joule(rounds) is None
