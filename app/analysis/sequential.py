"""Looking again after more engine starts without raising the false-positive rate: alpha spent over a budget.

A CI run compares the two builds, gives the cells still undecided more starts, and compares again. Each look is a
test: testing every look at the full level would call an unchanged cell more often than that level, the more
looks the more often. So the looks share the level. A look made when the share ``t`` of the budget is spent tests
at ``spent(t) - spent(t_before)``, with

    spent(0) = 0,    spent(t) = alpha (1 + min(t, 1)) / 2  for t > 0:

half of ``alpha`` at the first look whatever it costs (the first pass must call what is plain from it, as a
comparison without a budget would at ``alpha``), the other half in proportion to the budget spent after. The levels
of all looks sum to at most ``spent(1) = alpha``; by the union bound (Bonferroni over the looks) the chance that
any look calls a cell that did not change is at most ``alpha``, however much the looks depend on each other (each
reads the starts of those before). ``tests/analysis/test_sequential.py`` checks it by simulation.

Pure functions, standard library only.
"""


def spent(share: float, *, alpha: float) -> float:
    """The level spent once ``share`` of the budget is used: 0 at 0, else ``alpha (1 + min(share, 1)) / 2``.

    Raises ValueError unless ``0 < alpha < 1`` and ``share >= 0``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if share < 0:
        raise ValueError(f"a share of the budget is at least 0, got {share}")
    return 0.0 if share == 0 else alpha * (1 + min(share, 1.0)) / 2


def look_alpha(spent_before: float, spent_now: float, *, alpha: float) -> float:
    """The level to test at in a look made when the budget's share used goes from ``spent_before`` (0 before the
    first look) to ``spent_now``: ``spent(spent_now) - spent(spent_before)``.

    Raises ValueError when the look spends nothing new (``spent_now <= spent_before``, or the budget was used up
    before it): such a look may not test anything.
    """
    level = spent(spent_now, alpha=alpha) - spent(spent_before, alpha=alpha)
    if level <= 0:
        raise ValueError(f"a look at budget share {spent_now:g} after {spent_before:g} has no level left to test at")
    return level
