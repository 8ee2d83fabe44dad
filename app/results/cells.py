"""Jobs folded into cells: what the dashboards and the alarm read, one row per cell with its repeats pooled.

A cell is one point of the matrix in one build: GPU kind x backend x graph mode x everything else the
job ran with (model, workload, speculative config, engine arguments, environment: its ``variant``).
Repeats of a cell in several sweeps of one build pool into it.
"""

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from app.analysis.acceptance import lossless_share, per_position
from app.analysis.alarms import is_degenerate
from app.analysis.fallback import CellSpeed, Ratio, RepeatSpeed, pool_repeats, ratio, repeat_interval, scaled_ends
from app.analysis.intervals import Z_95, wilson_interval
from app.enums import JobState
from app.models import Crash, CrashSignature, Job, Result, Sweep
from app.schemas.physical import MAX_TOKENS_PER_S, plausible_speed

# Config keys that place a cell in the matrix; the rest is its variant.
_AXES = ("build", "gpu_kind", "backend", "graph_mode", "timeout_s")


@dataclass(frozen=True)
class CellScope:
    """Which cells to read; every field None reads all (pages pass a build or a sweep)."""

    sweep_id: int | None = None
    build: str | None = None
    builds: tuple[str, ...] | None = None
    gpu_kind: str | None = None
    method: str | None = None
    backend: str | None = None
    graph_mode: str | None = None

    def describe(self) -> str:
        """Where the cells come from, in words: ``sweep 3``, ``build vllm-0.26.0``..."""
        if self.sweep_id is not None:
            return f"sweep {self.sweep_id}"
        if self.build is not None:
            return f"build {self.build}"
        if self.builds is not None:
            return f"builds {', '.join(self.builds)} (the newest sweeps')" if self.builds else "no build yet"
        return "every build"

    def apply(self, stmt: Select) -> Select:
        for column, value in (
            (Job.sweep_id, self.sweep_id), (Job.build, self.build), (Job.gpu_kind, self.gpu_kind),
            (Job.method, self.method), (Job.backend, self.backend), (Job.graph_mode, self.graph_mode),
        ):
            if value is not None:
                stmt = stmt.where(column == value)
        if self.builds is not None:
            stmt = stmt.where(Job.build.in_(self.builds))
        return stmt


@dataclass
class Cell:
    """One cell with its repeats pooled. Counts are sums over the repeats that ran; ``speed`` is
    ``app.analysis.fallback.pool_repeats`` over them; acceptance is ``A / T`` with Wilson's interval
    over the summed counts."""

    build: str
    gpu_kind: str
    backend: str
    graph_mode: str
    method: str | None
    variant: str
    base_variant: str
    label: str
    sweep_ids: list[int] = field(default_factory=list)
    sweep_names: list[str] = field(default_factory=list)
    job_ids: list[int] = field(default_factory=list)
    states: Counter = field(default_factory=Counter)
    crash_kinds: Counter = field(default_factory=Counter)
    crash_signature: str | None = None
    crash_title: str | None = None
    resolved_graph_modes: set[str] = field(default_factory=set)
    downgraded: bool = False
    draft_eager: bool = False
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    accepted_per_position: list[int] = field(default_factory=list)
    lengths: list[tuple[float, float | None, float | None]] = field(default_factory=list)
    repeats: list[RepeatSpeed] = field(default_factory=list)
    speed: CellSpeed | None = None
    speedup: Ratio | None = None
    lossless_same: int = 0
    lossless_total: int = 0
    vllm_versions: set[str] = field(default_factory=set)
    gpu_names: set[str] = field(default_factory=set)
    ran_at: datetime | None = None
    alarms: list = field(default_factory=list)
    # Stored figures left out because no run can have made them (rows from before ``app.schemas.physical``).
    notes: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.build, self.gpu_kind, self.backend, self.graph_mode, self.variant)

    @property
    def ran(self) -> int:
        return self.states.get(JobState.SUCCEEDED, 0)

    @property
    def died(self) -> int:
        return self.states.get(JobState.CRASHED, 0) + self.states.get(JobState.TIMED_OUT, 0)

    @property
    def acceptance(self) -> tuple[float, float, float] | None:
        if self.draft_tokens == 0:
            return None
        return (self.accepted / self.draft_tokens, *wilson_interval(self.accepted, self.draft_tokens))

    @property
    def acceptance_length(self) -> tuple[float, float | None, float | None] | None:
        """``1 + A / D`` over the summed counts; the interval spans the repeats' own (each from
        ``app.analysis.acceptance.derive``): repeats are separate engine starts, so the envelope is kept."""
        if self.drafts == 0:
            return None
        lows = [low for _, low, _ in self.lengths if low is not None]
        highs = [high for _, _, high in self.lengths if high is not None]
        return (1 + self.accepted / self.drafts, min(lows) if lows else None, max(highs) if highs else None)

    @property
    def per_position(self) -> tuple[tuple[float, float, float], ...]:
        """``A_i / D`` with Wilson's interval per draft position, over the summed counts."""
        return per_position(self.accepted_per_position, self.drafts)

    @property
    def degenerate(self) -> bool:
        return is_degenerate(self.accepted, self.draft_tokens)

    @property
    def lossless(self) -> float | None:
        return self.lossless_same / self.lossless_total if self.lossless_total else None

    @property
    def tokens_per_s(self) -> tuple[float, float | None, float | None] | None:
        """The pooled median with ``exp(ln m +- 1.96 se)``, the interval ``fallback.ratio`` works with; for one
        engine start, its own rounds' interval carried to 95 % side by side (``fallback.repeat_interval``)."""
        if self.speed is None:
            return None
        se = self.speed.se_log
        m = self.speed.median
        if len(self.repeats) == 1 and (own := repeat_interval(self.repeats[0])) is not None:
            return (m, *own)
        if se is None:
            return (m, None, None)
        return (m, *(scaled_ends(m, -Z_95 * se, Z_95 * se) or (None, None)))

    @property
    def fallback(self) -> bool:
        """vLLM ran less than asked: a downgraded graph mode, or a draft left eager beside captured graphs."""
        return self.downgraded or (self.draft_eager and self.graph_mode != "NONE")


_COLUMNS = (
    Job.id, Job.sweep_id, Job.build, Job.gpu_kind, Job.backend, Job.graph_mode, Job.method, Job.config_hash,
    Job.state, Job.finished_at, Job.repeat,
    Result.id.label("result_id"), Result.tokens_per_s, Result.tokens_per_s_low, Result.tokens_per_s_high,
    Result.rounds, Result.num_drafts, Result.num_draft_tokens, Result.num_accepted_tokens, Result.accepted_per_position,
    Result.mean_acceptance_length, Result.mean_acceptance_length_low, Result.mean_acceptance_length_high,
    Result.resolved_graph_mode, Result.graph_downgraded, Result.draft_eager, Result.vllm_version, Result.gpu_name,
    Crash.kind.label("crash_kind"), CrashSignature.signature, CrashSignature.title, Sweep.name.label("sweep_name"),
)


def load(*, session: Session, scope: CellScope) -> list[Cell]:
    """The cells in scope, in matrix order, each with its speedup against its baseline cell and the share of its
    outputs that match the baseline's (lossless), where the sweep ran baselines. Two queries, three with
    baselines; nothing per cell."""
    stmt = scope.apply(
        select(*_COLUMNS)
        .join(Sweep, Sweep.id == Job.sweep_id)
        .outerjoin(Result, Result.job_id == Job.id)
        .outerjoin(Crash, Crash.job_id == Job.id)
        .outerjoin(CrashSignature, CrashSignature.id == Crash.signature_id)
    )
    cells: dict[tuple, Cell] = {}
    with_baselines: set[int] = set()
    # Core rows, not ORM ones: thousands of them, and nothing here needs an identity map.
    rows = session.connection().execute(stmt.order_by(Job.id)).all()
    _learn_variants(session, {row.config_hash for row in rows})
    for row in rows:
        variant, base_variant, label = _VARIANTS[row.config_hash]
        key = (row.build, row.gpu_kind, row.backend, row.graph_mode, variant)
        cell = cells.get(key)
        if cell is None:
            cell = cells[key] = Cell(row.build, row.gpu_kind, row.backend, row.graph_mode, row.method,
                                     variant, base_variant, label)
        _add(cell, row)
        if row.method is None:
            with_baselines.add(row.sweep_id)
    _tell_apart(cells.values())
    found = sorted(cells.values(), key=lambda c: (c.build, c.gpu_kind, c.label, c.backend, c.graph_mode))
    for cell in found:
        if cell.repeats:
            cell.speed = pool_repeats(cell.repeats)
    _speedups(found)
    if with_baselines:
        _lossless(session, scope, with_baselines, cells)
    return found


def _add(cell: Cell, row) -> None:  # noqa: ANN001
    cell.job_ids.append(row.id)
    if row.sweep_id not in cell.sweep_ids:
        cell.sweep_ids.append(row.sweep_id)
        cell.sweep_names.append(row.sweep_name)
    cell.states[row.state] += 1
    if row.finished_at is not None and (cell.ran_at is None or row.finished_at > cell.ran_at):
        cell.ran_at = row.finished_at
    if row.crash_kind is not None:
        cell.crash_kinds[str(row.crash_kind)] += 1
        cell.crash_signature, cell.crash_title = row.signature, row.title
    if row.result_id is None:
        return
    cell.resolved_graph_modes.add(row.resolved_graph_mode or "?")
    cell.downgraded |= bool(row.graph_downgraded)
    cell.draft_eager |= bool(row.draft_eager)
    if (why := impossible_counts(row)) is not None:
        cell.notes.append(f"job {row.id}: {why}; its acceptance is left out")
    else:
        cell.drafts += row.num_drafts
        cell.draft_tokens += row.num_draft_tokens
        cell.accepted += row.num_accepted_tokens
        for i, at in enumerate(row.accepted_per_position or []):
            if i == len(cell.accepted_per_position):
                cell.accepted_per_position.append(0)
            cell.accepted_per_position[i] += at
        if row.mean_acceptance_length is not None:
            cell.lengths.append((row.mean_acceptance_length, row.mean_acceptance_length_low, row.mean_acceptance_length_high))
    speeds = (row.tokens_per_s, row.tokens_per_s_low, row.tokens_per_s_high)
    if not all(speed is None or plausible_speed(speed) for speed in speeds):
        shown = ", ".join(f"{speed:g}" for speed in speeds if speed is not None)
        cell.notes.append(f"job {row.id}: tokens/s ({shown}) beyond {MAX_TOKENS_PER_S:g}, what no GPU does; left out")
    elif row.tokens_per_s > 0:
        cell.repeats.append(RepeatSpeed(row.tokens_per_s, row.tokens_per_s_low, row.tokens_per_s_high, row.rounds))
    cell.vllm_versions.add(row.vllm_version or "?")
    if row.gpu_name:
        cell.gpu_names.add(row.gpu_name)


def impossible_counts(row) -> str | None:  # noqa: ANN001
    """Why a stored row's spec-decode counters cannot come from one run (its intervals would fail), or None."""
    per_position = row.accepted_per_position or []
    if min(row.num_drafts, row.num_draft_tokens, row.num_accepted_tokens, *per_position) < 0:
        return "a negative count"
    if row.num_accepted_tokens > row.num_draft_tokens:
        return f"{row.num_accepted_tokens} accepted of {row.num_draft_tokens} draft tokens"
    if any(at > row.num_drafts for at in per_position):
        return f"a position accepted more than the {row.num_drafts} drafts"
    return None


# A job's config hash names its whole config, which never changes: its variant is read once per process,
# so a page reads no config it has seen (their JSON is most of the cost of reading thousands of jobs).
_VARIANTS: dict[str, tuple[str, str, str]] = {}


def variants(*, session: Session, hashes: set[str]) -> dict[str, str]:
    """The variant (a cell's config without its matrix axes, hashed) of each config hash."""
    _learn_variants(session, hashes)
    return {h: _VARIANTS[h][0] for h in hashes}


def _learn_variants(session: Session, hashes: set[str]) -> None:
    """Read the config of one job per hash not seen yet (in chunks: a bound list has limits)."""
    unknown = sorted(hashes - _VARIANTS.keys())
    for start in range(0, len(unknown), 500):
        first = select(func.min(Job.id)).where(Job.config_hash.in_(unknown[start:start + 500])).group_by(Job.config_hash)
        for config_hash, config in session.execute(select(Job.config_hash, Job.spec).where(Job.id.in_(first))):
            _VARIANTS[config_hash] = _variant(config)


def _variant(config: dict) -> tuple[str, str, str]:
    """(variant, the variant of its baseline, a label): short hashes of the config without its matrix axes."""
    # A baseline's config holds "speculative": null, and its speculative cells' base variant has no such key.
    rest = {k: v for k, v in config.items() if k not in _AXES and not (k == "speculative" and v is None)}
    text = json.dumps(rest, sort_keys=True, default=str)
    base = json.dumps({k: v for k, v in rest.items() if k != "speculative"}, sort_keys=True, default=str)
    spec = rest.get("speculative") or {}
    label = spec.get("method", "baseline")
    if spec.get("num_speculative_tokens"):
        label += f" k={spec['num_speculative_tokens']}"
    if rest.get("mode") == "serve":
        label += f" c={rest.get('concurrency')}"
    for name, value in sorted((rest.get("env") or {}).items()):
        label += f" {name}={value}"
    return (_digest(text), _digest(base), label)


def _tell_apart(cells) -> None:  # noqa: ANN001
    """Cells whose labels agree but whose variants differ (two sweeps of one build with other models or
    workloads) get their first sweep's name in the label."""
    variants: dict[tuple, set[str]] = defaultdict(set)
    for cell in cells:
        variants[(cell.build, cell.gpu_kind, cell.label)].add(cell.variant)
    for cell in cells:
        if len(variants[(cell.build, cell.gpu_kind, cell.label)]) > 1:
            cell.label = f"{cell.label} ({cell.sweep_names[0]})"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _speedups(cells: list[Cell]) -> None:
    baselines = {(c.build, c.gpu_kind, c.backend, c.graph_mode, c.variant): c for c in cells if c.method is None}
    for cell in cells:
        base = baselines.get((cell.build, cell.gpu_kind, cell.backend, cell.graph_mode, cell.base_variant))
        if cell.method is not None and base is not None and cell.speed and base.speed:
            cell.speedup = ratio(cell.speed, base.speed)


def _lossless(session: Session, scope: CellScope, sweep_ids: set[int], cells: dict[tuple, Cell]) -> None:
    """Per repeat, the outputs equal to its baseline's (same sweep, GPU, backend, graph mode and repeat), summed."""
    stmt = (
        select(Job.sweep_id, Job.build, Job.gpu_kind, Job.backend, Job.graph_mode, Job.repeat, Job.method, Job.config_hash,
               Result.raw["requests"].label("requests"))
        .join(Result, Result.job_id == Job.id)
        .where(Job.sweep_id.in_(sorted(sweep_ids)))
    )
    rows = session.execute(scope.apply(stmt) if scope.method is None else stmt).all()
    _learn_variants(session, {r.config_hash for r in rows})
    prints = {
        (r.sweep_id, r.gpu_kind, r.backend, r.graph_mode, r.repeat): [q["fingerprint"] for q in r.requests or []]
        for r in rows if r.method is None
    }
    for r in rows:
        theirs = prints.get((r.sweep_id, r.gpu_kind, r.backend, r.graph_mode, r.repeat))
        mine = [q["fingerprint"] for q in r.requests or []]
        cell = cells.get((r.build, r.gpu_kind, r.backend, r.graph_mode, _VARIANTS[r.config_hash][0]))
        if r.method is None or cell is None or not theirs or len(theirs) != len(mine):
            continue
        cell.lossless_same += round(lossless_share(mine, theirs) * len(mine))
        cell.lossless_total += len(mine)


RECENT_SWEEPS = 10


def recent_builds(*, session: Session, sweeps: int = RECENT_SWEEPS) -> tuple[str, ...]:
    """The builds of the newest ``sweeps`` sweeps: what pages and the alarm read when no filter names a build or
    a sweep (reading every build would mix them and read every result ever stored)."""
    newest = select(Sweep.build).order_by(Sweep.created_at.desc(), Sweep.id.desc()).limit(sweeps).subquery()
    return tuple(sorted(set(session.scalars(select(newest.c.build)))))


def latest_cell(*, session: Session) -> dict[str, str | None] | None:
    """GPU kind, method, backend and graph mode of the newest result: the history a page shows unasked."""
    row = session.execute(
        select(Job.gpu_kind, Job.method, Job.backend, Job.graph_mode).join(Result, Result.job_id == Job.id)
        .where(Job.method.is_not(None)).order_by(Result.id.desc()).limit(1)
    ).first()
    return dict(row._mapping) if row else None
