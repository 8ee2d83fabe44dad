"""Alpha spent over a budget (app.analysis.sequential): by hand, then by simulation of A/A cells looked at again."""

import itertools
import math
import random

import pytest

from app.analysis.noise import Spread
from app.analysis.sequential import look_alpha, spent
from app.analysis.verdicts import Change, paired_change


def test_spent_by_hand() -> None:
    assert spent(0.0, alpha=0.05) == 0.0
    assert spent(0.2, alpha=0.05) == pytest.approx(0.03)  # 0.05 x 1.2 / 2
    assert spent(1.0, alpha=0.05) == pytest.approx(0.05)
    assert spent(3.0, alpha=0.05) == pytest.approx(0.05)  # an overrun spends no more


def test_looks_share_the_level() -> None:
    looks = [0.0, 0.2, 0.6, 1.0, 1.4]
    levels = [look_alpha(a, b, alpha=0.05) for a, b in itertools.pairwise(looks[:-1])]
    assert levels == pytest.approx([0.03, 0.01, 0.01])
    assert sum(levels) == pytest.approx(0.05)
    # The first look gets half the level, however little of the budget it used.
    assert look_alpha(0.0, 1e-9, alpha=0.05) == pytest.approx(0.025)


@pytest.mark.parametrize(("before", "now"), [(0.5, 0.5), (0.6, 0.4), (1.0, 1.5)])
def test_a_look_that_spends_nothing_new_may_not_test(before: float, now: float) -> None:
    with pytest.raises(ValueError, match="no level left"):
        look_alpha(before, now, alpha=0.05)


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1])
def test_alpha_must_be_a_level(alpha: float) -> None:
    with pytest.raises(ValueError, match="alpha"):
        spent(0.5, alpha=alpha)


SIGMA = 0.1  # between-start spread of ln tokens/s: the H200's draft cells spread about this much
MODEL = Spread(SIGMA, 40, 10, 50)
LOOKS = 5  # after the first pass, four more, each with 2 more pairs, at budget shares 1/5 ... 5/5


def _called_anywhere(rng: random.Random, *, sequential: bool, change: float = 0.0, target: float = 0.05) -> bool:
    """One cell looked at after 3 pairs, then after 2 more per look until called, or could detect ``target``, or the
    budget ends; True if some look called it worse or better."""
    differences = [rng.gauss(change, SIGMA * math.sqrt(2)) for _ in range(3)]
    for look in range(1, LOOKS + 1):
        alpha = look_alpha((look - 1) / LOOKS, look / LOOKS, alpha=0.05) if sequential else 0.05
        found = paired_change([(1.0, math.exp(d)) for d in differences], MODEL, alpha=alpha)
        if found.change in (Change.WORSE, Change.BETTER):
            return True
        if found.change is Change.UNCHANGED and found.detectable <= target:
            return False
        differences += [rng.gauss(change, SIGMA * math.sqrt(2)) for _ in range(2)]
    return False


def test_looking_again_keeps_the_false_positive_rate_at_its_level() -> None:
    rng = random.Random(20261203)
    cells = 4000
    with_rule = sum(_called_anywhere(rng, sequential=True) for _ in range(cells)) / cells
    every_look_at_alpha = sum(_called_anywhere(rng, sequential=False) for _ in range(cells)) / cells
    # The binomial's standard error at 5 % over 4000 cells is 0.34 %: three of them above the level would fail.
    assert with_rule <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / cells)
    # Without the rule the same looks call unchanged cells more often than 5 %: the rule is what holds the level.
    assert every_look_at_alpha > 0.05 + 3 * math.sqrt(0.05 * 0.95 / cells)


def test_more_starts_find_a_real_drop_more_often_than_the_first_pass() -> None:
    # A 10 % drop at a 10 % spread: 3 pairs at the full level find it about one time in five; up to 11 pairs,
    # each look at its share of the level, about twice as often (a 10 % change at this noise needs more starts).
    rng = random.Random(7)
    drop = math.log(0.9)
    first_pass = sum(
        paired_change([(1.0, math.exp(rng.gauss(drop, SIGMA * math.sqrt(2)))) for _ in range(3)], MODEL).change
        is Change.WORSE for _ in range(1000)) / 1000
    looked_again = sum(_called_anywhere(rng, sequential=True, change=drop) for _ in range(1000)) / 1000
    assert looked_again > first_pass + 0.1
