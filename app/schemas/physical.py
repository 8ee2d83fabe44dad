"""How large a measured number can physically be: what ``complete`` and ``import`` accept, and what the
comparisons read back.

One absurd result (``tokens_per_s: 1e308``) once broke every comparison of its GPU kind: the history's
mean overflowed in PostgreSQL. The ceilings sit far above anything a GPU does (an H200 runs a tiny model
at about 1e5 tokens/s) and far below what the arithmetic downstream can no longer carry:

- tokens/s at most 1e7, requests/s at most 1e6;
- durations at most 30 days (a cell's timeout is at most one), latencies likewise, in milliseconds;
- counts (requests, tokens, drafts) at most 1e15, within the database's 64-bit integers;
- rates within [0, 1];
- energy at most 1e12 J (a month of 8 GPUs at 1 kW is 2e10 J), tokens per joule at most 1e6 (an H200 running a
  tiny model makes about 1e5 tokens/s at a few hundred watts: hundreds of tokens per joule);
- GPUs of one worker at most 1024: what a worker registers, so also what one cell may ask for (a larger
  ``tensor_parallel_size`` x ``pipeline_parallel_size`` would wait forever for a worker that cannot exist).

A count is an integer and every other measure a number: JSON's ``true`` is refused, although Python's bool is an int
(pydantic took it as 1), and so is text (pydantic read ``"100"`` as 100): a runner writes numbers.
"""

import json
import math
from typing import Annotated

from pydantic import BeforeValidator, Field

MAX_TOKENS_PER_S = 1e7
MAX_REQUESTS_PER_S = 1e6
MAX_SECONDS = 30 * 24 * 3600.0
MAX_COUNT = 10**15
MAX_JOULES = 1e12
MAX_TOKENS_PER_JOULE = 1e6
MAX_GPUS = 1024


def _not_a_bool(value: object) -> object:
    if isinstance(value, bool | str):
        raise ValueError(f"must be a count, an integer from 0 to {MAX_COUNT}, not {json.dumps(value)}")
    return value


def _measure(low: float, high: float) -> object:
    """A float from ``low`` to ``high``: an integer or a float in JSON, never ``true`` or text."""
    def number(value: object) -> object:
        if isinstance(value, bool | str):
            raise ValueError(f"must be a number from {low:g} to {high:g}, not {json.dumps(value)}")
        return value

    return Annotated[float, BeforeValidator(number), Field(ge=low, le=high)]


TokensPerS = _measure(0, MAX_TOKENS_PER_S)
RequestsPerS = _measure(0, MAX_REQUESTS_PER_S)
Seconds = _measure(0, MAX_SECONDS)
Milliseconds = _measure(0, MAX_SECONDS * 1000)
Count = Annotated[int, BeforeValidator(_not_a_bool), Field(ge=0, le=MAX_COUNT)]
Rate = _measure(0, 1)
Joules = _measure(0, MAX_JOULES)


def plausible_speed(tokens_per_s: float | None) -> bool:
    """Whether a stored tokens/s is one the ceilings allow (rows stored before them may hold anything)."""
    return tokens_per_s is not None and math.isfinite(tokens_per_s) and 0 <= tokens_per_s <= MAX_TOKENS_PER_S
