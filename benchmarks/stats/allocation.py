"""How a GPU minute is best split between engine starts and rounds within a start: pure functions.

A verdict's precision comes from starts, and each start pays a fixed cost before it measures anything (importing
vLLM, the engine's start, the warm-up: ``overhead_s``) and then ``round_s`` seconds per round. Two noises set what a
start buys (all on the log scale of tokens/s, as ``app.analysis.noise`` keeps them):

- ``start_var`` (``sigma_s^2``): how far a whole start's speed lands from the next one's, whatever it measures
  (the engine's luck at start: memory placement, compiled kernels chosen, the host's state);
- ``round_var`` (``sigma_w^2``): how far one round lands from its start's mean, which more rounds average away.

A start of ``R`` rounds then has variance ``sigma_s^2 + sigma_w^2 / R`` and costs ``C + R T`` seconds. This is the
two-stage sampling problem (Cochran, *Sampling Techniques*, 3rd ed., section 10.6): the precision a GPU second buys is
highest at

.. math::

    R^* = \\sqrt{\\frac{\\sigma_w^2 \\, C}{\\sigma_s^2 \\, T}}

and a start's efficiency (measured over wall seconds) follows from it, it is not a goal of its own: where starts differ
more than their rounds, short starts and more of them buy more precision per minute than long ones.

Assumptions, stated where the figures are printed: a start's value is the mean of its rounds (the service takes
their median, whose variance is larger by up to pi/2 for normal rounds, so ``R^*`` is a lower bound there) and its
rounds are independent (runs of slow passes make them less so; their share then shows as ``start_var``).
"""

import math


def start_variance(between_sd: float, within_sd: float, rounds: float) -> float:
    """The start-to-start variance left once a start's own rounds are averaged out:

    .. math::

        \\hat\\sigma_s^2 = \\max\\left(s_b^2 - \\frac{s_w^2}{R_0},\\ 0\\right)

    ``between_sd`` is the spread of starts that each ran ``rounds`` (``R_0``) rounds and ``within_sd`` the spread of
    one round about its start's mean. Zero where the rounds explain all of the starts' spread (the moment estimate of
    a one-way random-effects model, truncated at zero as variance components are)."""
    return max(between_sd ** 2 - within_sd ** 2 / rounds, 0.0)


def cost_of_precision(start_var: float, round_var: float, overhead_s: float, round_s: float, rounds: int) -> float:
    """GPU seconds times variance of one start of ``rounds`` rounds: ``(sigma_s^2 + sigma_w^2 / R)(C + R T)``.

    The seconds any number of starts needs for a given variance of their mean is this over that variance, so the
    ratio of two values is the ratio of the GPU time two ways need for the same interval."""
    return (start_var + round_var / rounds) * (overhead_s + rounds * round_s)


def best_rounds(start_var: float, round_var: float, overhead_s: float, round_s: float, *, most: int = 50) -> int:
    """The whole number of rounds a start, from 1 to ``most``, that needs the fewest GPU seconds for a given
    precision (the integer minimising :func:`cost_of_precision`; near ``sqrt(sigma_w^2 C / (sigma_s^2 T))``).
    ``most`` where starts do not differ beyond their rounds (``start_var`` 0): then one long start is best, and a
    verdict still needs two starts a side to see the start-to-start spread it assumed away."""
    return min(range(1, most + 1), key=lambda r: (cost_of_precision(start_var, round_var, overhead_s, round_s, r), r))


def efficiency(overhead_s: float, round_s: float, rounds: int) -> float:
    """A start's measured seconds over its wall seconds: ``R T / (C + R T)``."""
    measured = rounds * round_s
    return measured / (overhead_s + measured) if measured > 0 else math.nan
