"""Which cells are one experiment: a cell's measured identity, the baseline it compares with, the label that
tells it from the others, and why two sets of cells share none.

Cells match across builds, sweeps and runs (the compare table, the alarm's eager sibling, the fallback's
references, the history of a cell, the baseline of a speedup) by what they measured, never by how long
they were measured: one build run with 3 rounds and another with 5 share their cells.
"""

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
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
    # The digest and label of what was measured but the serving concurrency: the cells of one line drawn
    # against clients (``/serving``). An offline cell has no concurrency: its series holds it alone.
    series: str
    series_label: str
    # What ``measured`` digests, flattened: (dotted path, its value as JSON), sorted, nulls left out. Labels and
    # ``apart`` read it; equal digests have equal fields, so it takes no part in equality.
    fields: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)


class Axes(Protocol):
    """A job or cell's place in the matrix."""

    gpu_kind: str
    backend: str
    graph_mode: str


class Measured(Axes, Protocol):
    """A cell: its place in the matrix and its variant."""

    variant: Variant


@dataclass(frozen=True)
class Difference:
    """One field of the measured identity as each side holds it: the values of its cells (``none`` where absent)."""

    field: str
    base: tuple[str, ...]
    head: tuple[str, ...]
    every_cell: bool  # no value is held on both sides: the field alone parts every base cell from every head cell

    def __str__(self) -> str:
        return f"{self.field}: {_listed(self.base)} vs {_listed(self.head)}"


@dataclass(frozen=True)
class Apart:
    """Why two sets of cells share none (``apart``): the fields, after what they say (``lead``)."""

    differences: tuple[Difference, ...]
    lead: str

    @property
    def sentence(self) -> str:
        """``Every base cell differs from every head cell in model: target vs qwen3_8b; workload.max_tokens: 128 vs 256.``"""
        return f"{self.lead} {'; '.join(map(str, self.differences))}."


def variant(config: dict[str, Any]) -> Variant:
    """The variant of a job's config: what it measured besides GPU kind, backend and graph mode.

    Counts: the model and tokenizer, the workload (dataset, categories, prompts, output tokens, input
    lengths, temperature, seeds), the speculative config, the engine arguments, the mode and concurrency,
    the environment. Does not count: the build (what two compared runs differ in), the timeout, the
    workload's rounds, window (``min_window_s``) and warm-up prompts; nor what is not in a config: the
    repeats, the sweep's name. The series is the same but the serving concurrency: the cells of one line drawn
    against clients.
    """
    rest = {k: v for k, v in config.items() if k not in (*MATRIX_AXES, *NOT_MEASURED)}
    workload = rest.get("workload")
    if isinstance(workload, dict):
        rest["workload"] = {k: v for k, v in workload.items() if k not in NOT_MEASURED_WORKLOAD}
    # A baseline's config holds ``speculative: null``; leaving the key out instead matched no baseline.
    base = {**rest, "speculative": None}
    fields = tuple(sorted(_flat(rest)))
    flat = dict(fields)
    series_label = _name({k: v for k, v in flat.items() if k not in ("mode", "concurrency")})
    if rest.get("mode") == "serve":
        # Said where starts counted otherwise are beside (``counted``); the digests never held it.
        fields = tuple(sorted((*fields, COUNTED)))
    return Variant(_digest(rest), _digest(base), _digest({**rest, "concurrency": None}), series_label, fields)


def measured(axes: Axes, variant: Variant) -> Identity:
    """A job's or cell's measured identity: what cells of other builds or runs must share to be compared with it."""
    return Identity(axes.gpu_kind, axes.backend, axes.graph_mode, variant.measured)


def baseline(axes: Axes, variant: Variant) -> Identity:
    """The measured identity of a job's or cell's baseline: the no-speculation cell that measured the same but
    the speculative config (same GPU kind, backend, graph mode, model, workload, engine arguments, environment)."""
    return Identity(axes.gpu_kind, axes.backend, axes.graph_mode, variant.baseline)


# How a serving start counted a stream whose tokens decoded to no text, as labels and ``apart`` show it: today's
# runner, and the one before cell schema 5 (``counted``).
COUNTED = ("counting", json.dumps("empty streams completed"))
EMPTY_AS_FAILED = ("counting", json.dumps("empty streams failed (runner before cell schema 5)"))


def counted(variant: Variant, empty_as_failed: bool) -> Variant:
    """The variant of a start as its runner counted it: unchanged, or, where the serving runner before cell schema 5
    counted a stream whose tokens decoded to no text as failed and left its tokens out of tokens/s
    (``Result.empty_as_failed``), a variant of its own, whose baseline and line are the starts counted alike: such
    tokens/s are another quantity, never pooled or compared with today's."""
    if not empty_as_failed:
        return variant
    return Variant(
        _digest({"counted": variant.measured, "empty_as_failed": True}),
        _digest({"counted": variant.baseline, "empty_as_failed": True}),
        _digest({"counted": variant.series, "empty_as_failed": True}),
        variant.series_label,  # labels (``labels``) name the way of counting where cells counted otherwise are beside
        tuple(sorted({*variant.fields} - {COUNTED} | {EMPTY_AS_FAILED})),
    )


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


def _flat(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """``(dotted path, JSON)`` of every leaf of a config but the nulls (a null and an absent field say one thing);
    an empty mapping is a leaf (``env: {}``)."""
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            yield from _flat(inner, f"{path}.{key}" if path else str(key))
    elif value is not None:
        yield path, json.dumps(value, sort_keys=True, default=str)


# The order in which a label reaches for a field that tells two variants of one name apart, after the fewest
# fields: what the draft is, then the target, what it was asked, how the engine ran.
_PREFERRED = ("speculative.model", "speculative.", "model", "tokenizer", "workload.", "engine_args.")


def labels(variants: Iterable[Variant]) -> dict[str, str]:
    """Each variant's label, by its ``measured`` digest: one per variant, no two alike among ``variants``.

    A label names the speculative method (``baseline`` without one), its ``k``, the serving concurrency and
    the environment (``draft_model k=3 c=16``). Variants whose names agree are told apart by the fewest fields
    that do it, chosen greedily: the field whose values split the most pairs still alike, ties by
    ``_PREFERRED``. Where a field splits a set of variants, those whose value is not the one most of that set
    share write it as ``field=value`` (``draft_model k=3 draft=draft-noise-0.03``; a path by its last part).
    Two labels that still agree (fields differing only in how JSON writes them) get the digest.

    A variant's label depends on the others read with it: a page labels every cell it reads at once, so one
    config reads the same across its builds. O(n f) per field chosen, n variants of f fields.
    """
    named: dict[str, dict[str, dict[str, str]]] = {}
    for v in variants:
        fields = dict(v.fields)
        named.setdefault(_name(fields), {})[v.measured] = fields
    found: dict[str, str] = {}
    for name, group in named.items():
        told = _telling(group)
        for digest, fields in group.items():
            values = {key: [f.get(key) for f in group.values()] for key in told[digest]}
            found[digest] = " ".join([name, *(_shown(key, fields.get(key), among) for key, among in values.items())])
    seen = Counter(found.values())
    return {digest: f"{label} [{digest[:8]}]" if seen[label] > 1 else label for digest, label in found.items()}


def _name(fields: dict[str, str]) -> str:
    def value(path: str) -> Any:
        return json.loads(fields[path]) if path in fields else None

    name = str(value("speculative.method") or "baseline")
    if value("speculative.num_speculative_tokens"):
        name += f" k={value('speculative.num_speculative_tokens')}"
    if value("mode") == "serve":
        name += f" c={value('concurrency')}"
    for path in sorted(p for p in fields if p.startswith("env.")):
        name += f" {path.removeprefix('env.')}={value(path)}"
    return name


def _telling(group: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """Per variant of ``group`` (digest -> fields), the fields its label writes, in ``_PREFERRED`` order.

    Greedy: while two variants are alike in every field chosen, choose the field that leaves the fewest pairs
    alike (the sum over the sets still alike of the squared counts of its values); in each set it splits, the
    variants off the value most of that set share write it (all of them when no value is most shared).
    """
    keys = sorted({k for fields in group.values() for k in fields}, key=_preference)
    written: dict[str, list[str]] = {digest: [] for digest in group}
    alike = [list(group)] if len(group) > 1 else []
    while alike:
        best = min(keys, key=lambda k: sum(n * n for c in alike for n in Counter(group[d].get(k) for d in c).values()))
        split = []
        for c in alike:
            counts = Counter(group[d].get(best) for d in c).most_common()
            if len(counts) > 1:
                common = counts[0][0] if counts[0][1] > counts[1][1] else object()
                for digest in c:
                    if group[digest].get(best) != common:
                        written[digest].append(best)
            split += [[d for d in c if group[d].get(best) == value] for value, _ in counts]
        if len(split) == len(alike):
            break  # alike in every field: told apart by their digests
        alike = [c for c in split if len(c) > 1]
    return {digest: sorted(keys, key=_preference) for digest, keys in written.items()}


def _preference(key: str) -> tuple[int, str]:
    return next((i for i, p in enumerate(_PREFERRED) if key == p or (p.endswith(".") and key.startswith(p))),
                len(_PREFERRED)), key


def _shown(key: str, value: str | None, among: list[str | None]) -> str:
    name = "draft" if key == "speculative.model" else key.split(".")[-1]
    return f"{name}={_value(value, among)}"


def _value(value: str | None, among: list[str | None]) -> str:
    """A field's JSON as a reader reads it: text unquoted, ``none`` where absent, a path by its last part when
    the last parts of ``among`` (the values it is told from) differ as the paths do."""
    if value is None:
        return "none"
    text = json.loads(value)
    if not isinstance(text, str):
        return value
    if "/" in text:
        paths = {json.loads(v) for v in among if v is not None}
        if all(isinstance(p, str) for p in paths) and len({PurePosixPath(p).name for p in paths}) == len(paths):
            return PurePosixPath(text).name or text
    return text


# Values a difference lists of each side before "and N more".
LISTED = 4


def _listed(values: tuple[str, ...]) -> str:
    shown = ", ".join(values[:LISTED])
    return f"{shown} and {len(values) - LISTED} more" if len(values) > LISTED else shown


def apart(base: Iterable[Measured], head: Iterable[Measured]) -> Apart | None:
    """Why two sets of cells share no measured identity (``measured``), from its fields: the matrix axes, then what
    the variant measured by dotted path (``workload.max_tokens``); None when a side has no cell or they share one.

    First the fields where no value of one side is held on the other: each alone parts every pair (``model: target
    vs qwen3_8b``). When no field does, the fields whose sets of values differ; when those agree too, the fields
    whose values vary, which the two sides combine differently. O((n + m) f), n and m cells of f fields.
    """
    base, head = list(base), list(head)
    if not base or not head or {measured(c, c.variant) for c in base} & {measured(c, c.variant) for c in head}:
        return None
    held = [_held(side) for side in (base, head)]
    paths = [*MATRIX_AXES, *sorted({p for side in held for p in side} - set(MATRIX_AXES), key=_preference)]

    sides = {p: (held[0].get(p, {None}), held[1].get(p, {None})) for p in paths}

    def differences(test: Callable[[set, set], bool]) -> tuple[Difference, ...]:
        found = []
        for path, (b, h) in sides.items():
            if test(b, h):
                among = list(b | h)
                shown = [tuple(sorted({_value(v, among) for v in side})) for side in (b, h)]
                found.append(Difference(path, *shown, every_cell=not b & h))
        return tuple(found)

    if found := differences(lambda b, h: not b & h):
        return Apart(found, "Every base cell differs from every head cell in")
    if found := differences(lambda b, h: b != h):
        return Apart(found, "No one field parts every pair of cells; the sides hold other values of")
    return Apart(differences(lambda b, h: len(b | h) > 1), "The sides hold the same values of each field, combined otherwise, in")


def _held(cells: list[Measured]) -> dict[str, set[str | None]]:
    """Per field of the measured identity, the values ``cells`` hold, None where a cell has no such field."""
    rows = [{**{axis: json.dumps(getattr(c, axis)) for axis in MATRIX_AXES}, **dict(c.variant.fields)} for c in cells]
    paths = {p for row in rows for p in row}
    return {p: {row.get(p) for row in rows} for p in paths}
