"""Where merges and splits made by hand send a crash, after its log has been signed.

Rules, each override in the order it was made, a later one winning:

- a **split** sends the crashes of its jobs to its own group;
- a **merge** sends to the group it merged into the crashes of its jobs (both groups' members when it
  was made) and every crash whose group, so far, is the group it merged away.

Jobs keep an override across ``draftbench rederive`` whatever the signing rules make of their logs;
a merge also catches crashes recorded later under the merged signature. Pure functions.
"""

import hashlib
from collections.abc import Iterable, Sequence
from typing import NamedTuple

MERGE = "merge"
SPLIT = "split"


class Override(NamedTuple):
    action: str  # MERGE or SPLIT
    signature: str  # the group merged away, or split
    into: str  # the group merged into, or the split's new group
    job_ids: frozenset[int]


def group_of(signature: str, job_id: int, overrides: Sequence[Override]) -> str:
    """The group of a crash signed ``signature``, by the rules in the module docstring. O(len(overrides))."""
    group = signature
    for override in overrides:
        if job_id in override.job_ids or (override.action == MERGE and group == override.signature):
            group = override.into
    return group


def split_signature(signature: str, job_ids: Iterable[int]) -> str:
    """The new group's signature for the crashes of ``job_ids`` split from group ``signature``."""
    key = "\n".join(["split", signature, *map(str, sorted(job_ids))])
    return hashlib.sha256(key.encode()).hexdigest()
