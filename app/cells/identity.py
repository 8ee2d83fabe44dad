"""Which cells are one experiment: a cell's measured identity and the baseline it compares with.

Cells match across builds, sweeps and runs (the compare table, the alarm's eager sibling, the fallback's
references, the history of a cell, the baseline of a speedup) by what they measured, never by how long
they were measured: one build run with 3 rounds and another with 5 share their cells.
"""

import hashlib
import json
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.models import Job

# Config keys that place a cell in the matrix, kept beside its variant (pages group and filter by them).
MATRIX_AXES = ("gpu_kind", "backend", "graph_mode")
# Config keys that say how long, or of which build, a cell was measured, not what: never part of an identity.
NOT_MEASURED = ("build", "timeout_s")
NOT_MEASURED_WORKLOAD = ("rounds", "min_window_s", "warmup_prompts")


class Identity(NamedTuple):
    """What a cell measured, the build aside: equal identities are the same experiment."""

    gpu_kind: str
    backend: str
    graph_mode: str
    variant: str


@dataclass(frozen=True)
class Variant:
    measured: str  # the digest of what was measured besides the matrix axes
    baseline: str  # the same without the speculative config: the variant of the cell's baseline
    label: str
    # The digest and label of what was measured but the serving concurrency: the cells of one line drawn
    # against clients (``/serving``). An offline cell has no concurrency: its series holds it alone.
    series: str
    series_label: str


class Axes(Protocol):
    """A job or cell's place in the matrix."""

    gpu_kind: str
    backend: str
    graph_mode: str


def variant(config: dict[str, Any]) -> Variant:
    """The variant of a job's config: what it measured besides GPU kind, backend and graph mode.

    Counts: the model and tokenizer, the workload (dataset, categories, prompts, output tokens, input
    lengths, temperature, seeds), the speculative config, the engine arguments, the mode and concurrency,
    the environment. Does not count: the build (what two compared runs differ in), the timeout, the
    workload's rounds, window (``min_window_s``) and warm-up prompts; nor what is not in a config: the
    repeats, the sweep's name. The label names the speculative method, its ``k``, serving concurrency and
    environment, for pages; the series label the same but the concurrency.
    """
    rest = {k: v for k, v in config.items() if k not in (*MATRIX_AXES, *NOT_MEASURED)}
    workload = rest.get("workload")
    if isinstance(workload, dict):
        rest["workload"] = {k: v for k, v in workload.items() if k not in NOT_MEASURED_WORKLOAD}
    # A baseline's config holds ``speculative: null``; leaving the key out instead matched no baseline.
    base = {**rest, "speculative": None}
    spec = rest.get("speculative") or {}
    method = spec.get("method", "baseline")
    if spec.get("num_speculative_tokens"):
        method += f" k={spec['num_speculative_tokens']}"
    clients = f" c={rest.get('concurrency')}" if rest.get("mode") == "serve" else ""
    env = "".join(f" {name}={value}" for name, value in sorted((rest.get("env") or {}).items()))
    return Variant(_digest(rest), _digest(base), method + clients + env, _digest({**rest, "concurrency": None}), method + env)


def measured(axes: Axes, variant: Variant) -> Identity:
    """A job's or cell's measured identity: what cells of other builds or runs must share to be compared with it."""
    return Identity(axes.gpu_kind, axes.backend, axes.graph_mode, variant.measured)


def baseline(axes: Axes, variant: Variant) -> Identity:
    """The measured identity of a job's or cell's baseline: the no-speculation cell that measured the same but
    the speculative config (same GPU kind, backend, graph mode, model, workload, engine arguments, environment)."""
    return Identity(axes.gpu_kind, axes.backend, axes.graph_mode, variant.baseline)


# A job's config hash names its whole config, which never changes: its variant is read once per process,
# so a page reads no config it has seen (their JSON is most of the cost of reading thousands of jobs).
_VARIANTS: dict[str, Variant] = {}


def variants(*, session: Session, hashes: set[str]) -> dict[str, Variant]:
    """The variant of each config hash, reading the config of one job per hash not seen yet (in chunks: a
    bound list has limits)."""
    unknown = sorted(hashes - _VARIANTS.keys())
    for start in range(0, len(unknown), 500):
        first = select(func.min(Job.id)).where(Job.config_hash.in_(unknown[start:start + 500])).group_by(Job.config_hash)
        for config_hash, config in session.execute(select(Job.config_hash, Job.spec).where(Job.id.in_(first))):
            _VARIANTS[config_hash] = variant(config)
    return {h: _VARIANTS[h] for h in hashes}


def _digest(value: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12]
