"""A pooled cell: one cell of one build with the repeats of every sweep that ran it pooled, as pages, the
alarm and the verdicts read it.

A cell is one point of the matrix in one build: GPU kind x backend x graph mode x everything else its
jobs measured (its ``variant``, ``app.cells.identity``).
"""

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from app.analysis import request_acceptance
from app.analysis.acceptance import per_position
from app.analysis.alarms import is_degenerate
from app.analysis.fallback import CellSpeed, Ratio, RepeatSpeed, repeat_interval, scaled_ends
from app.analysis.intervals import Z_95, wilson_interval
from app.analysis.verdicts import CellSample
from app.cells import identity
from app.cells.identity import Identity, Variant
from app.enums import JobState
from app.schemas.physical import MAX_TOKENS_PER_JOULE, MAX_TOKENS_PER_S, plausible_speed


@dataclass
class PooledCell:
    """One cell of one build with its repeats pooled (``add``). Counts are sums over the repeats that ran;
    ``speed`` is ``app.analysis.fallback.pool_repeats`` over them, and ``per_joule`` the same over the repeats'
    tokens/J where the GPU reported energy; acceptance is ``A / T`` with Wilson's interval over the summed counts."""

    build: str
    gpu_kind: str
    backend: str
    graph_mode: str
    method: str | None
    variant: Variant
    label: str
    concurrency: int | None = None  # serving mode's clients at once; None offline
    mode: str = "offline"  # "offline", or "serve" (vLLM's OpenAI server with ``concurrency`` clients)
    sweep_ids: list[int] = field(default_factory=list)
    sweep_names: list[str] = field(default_factory=list)
    job_ids: list[int] = field(default_factory=list)
    # The jobs whose results were pooled, each with its sweep: where the cell's numbers came from.
    measured_in: dict[int, int] = field(default_factory=dict)
    # The jobs that died (crashed or timed out) whose log was kept, in job order: the logs a page links beside the
    # cell's crashes. A death reported without its log is counted in ``states`` and ``crash_kinds`` but not here.
    crashed_in: list[int] = field(default_factory=list)
    states: Counter = field(default_factory=Counter)
    crash_kinds: Counter = field(default_factory=Counter)
    # Its starts' crash groups, ``(kind, signature, title) -> starts``: a cell whose starts died two ways links each kind
    # to its own group (``crash_signature`` keeps the last crash's alone).
    crash_groups: Counter = field(default_factory=Counter)
    crash_signature: str | None = None
    crash_title: str | None = None
    resolved_graph_modes: set[str] = field(default_factory=set)
    resolved_draft_graph_modes: set[str] = field(default_factory=set)
    downgraded: bool = False
    draft_eager: bool = False
    # Starts whose log said vLLM turned asynchronous scheduling off, and those whose log said nothing of it; a row stored
    # before migration 0025 and not read again (``draftbench rederive``) counts in neither.
    async_off: int = 0
    async_kept: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    accepted_per_position: list[int] = field(default_factory=list)
    lengths: list[tuple[float, float | None, float | None]] = field(default_factory=list)
    # The starts' requests by prompt category, summed (``add_requests``); None where no start recorded per-request
    # counters, or the page read none (``app.cells.service.with_requests``). ``recorded_starts`` of the starts that
    # ran recorded them.
    requests: request_acceptance.RequestAcceptance | None = None
    recorded_starts: int = 0
    repeats: list[RepeatSpeed] = field(default_factory=list)
    # Starts run as one half of a pair (``app.sweeps.pairing``): each pair's id and that start's tokens/s.
    paired: dict[str, float] = field(default_factory=dict)
    speed: CellSpeed | None = None
    speedup: Ratio | None = None
    # Tokens per joule of the repeats whose GPUs reported energy, pooled as ``speed`` is; why the others have none.
    energy_repeats: list[RepeatSpeed] = field(default_factory=list)
    per_joule: CellSpeed | None = None
    energy_reasons: set[str] = field(default_factory=set)
    # Serving mode: each engine start's ``Result.serving`` as stored (``app.cells.serving`` pools them).
    serving: list[dict] = field(default_factory=list)
    # The starts whose runner counted a stream of tokens without text as failed (runners/serving.py before cell
    # schema 5); vLLM's own bench tools, imported, count it completed.
    empty_as_failed: int = 0
    lossless_same: int = 0
    lossless_total: int = 0
    vllm_versions: set[str] = field(default_factory=set)
    # What measured its results (``ResultSource``): a page marks a number from vLLM's own bench tools, which has no rounds.
    sources: set[str] = field(default_factory=set)
    gpu_names: set[str] = field(default_factory=set)
    ran_at: datetime | None = None  # its newest job's finish
    # Its first job's start (its finish where no start was recorded): from here to ``ran_at`` its runs took place. A
    # build's place in a series by when it ran (``/history``, the alerts) is this, its first run: a build run again
    # later (a CI pair's base, an A/A) is no newer a build for it.
    first_ran_at: datetime | None = None
    # Each of its sweeps' newest finish among its jobs: which of them ran last (a run's facts name the newest sweeps,
    # whatever order their ids were given in: an import numbers them as it reads them).
    sweeps_ran: dict[int, datetime] = field(default_factory=dict)
    # Stored figures left out because no run can have made them (rows from before ``app.schemas.physical``).
    notes: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, Identity]:
        """The cell within its build: its build and measured identity (``app.cells.identity.measured``)."""
        return (self.build, self.identity)

    @property
    def identity(self) -> Identity:
        return identity.measured(self, self.variant)

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
    def categories(self) -> list[request_acceptance.CategoryAcceptance]:
        """Acceptance per prompt category over the pooled starts' requests (``request_acceptance.by_category``);
        empty when none was recorded."""
        return request_acceptance.by_category(self.requests) if self.requests else []

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
        """``shown(speed, repeats)``: the pooled tokens/s with its 95 % interval."""
        return shown(self.speed, self.repeats)

    @property
    def tokens_per_joule(self) -> tuple[float, float | None, float | None] | None:
        """``shown(per_joule, energy_repeats)``: the pooled tokens/J with its 95 % interval; None where no repeat
        reported energy (``energy_reasons`` says why)."""
        return shown(self.per_joule, self.energy_repeats)

    @property
    def fallback(self) -> bool:
        """vLLM ran less than asked: a downgraded graph mode, or a draft left eager beside captured graphs."""
        return self.downgraded or (self.draft_eager and self.graph_mode != "NONE")


def scheduler_differs(cell: PooledCell, baseline: PooledCell | None) -> bool:
    """vLLM turned asynchronous scheduling off for some of ``cell``'s starts and kept it for some of ``baseline``'s: the
    speedup between them then holds the scheduler's difference too, not the drafting's cost alone (vLLM 0.26 turns it
    off for ``draft_model``; the cell's own steps then wait for the CPU's scheduling of the next)."""
    return baseline is not None and cell.async_off > 0 and baseline.async_kept > 0


def shown(pooled: CellSpeed | None, repeats: list[RepeatSpeed]) -> tuple[float, float | None, float | None] | None:
    """The pooled median with ``exp(ln m +- 1.96 se)``, the interval ``fallback.ratio`` works with; for one engine
    start, its own interval (over its passes or its rounds) carried to 95 % side by side (``fallback.repeat_interval``)."""
    if pooled is None:
        return None
    se = pooled.se_log
    m = pooled.median
    if len(repeats) == 1 and (own := repeat_interval(repeats[0])) is not None:
        return (m, *own)
    if se is None:
        return (m, None, None)
    return (m, *(scaled_ends(m, -Z_95 * se, Z_95 * se) or (None, None)))


# Why a start has no tokens/J where its row stored no reason (NULL): it was stored before energy was read, not refused.
NOT_RECORDED = "not recorded: stored before draftbench read the GPUs' energy (a row from before migration 0023)"


class StoredResult(Protocol):
    """The columns of a stored result (``app.models.Result``) that pooling reads."""

    tokens_per_s: float
    tokens_per_s_low: float | None
    tokens_per_s_high: float | None
    tokens_per_s_level: float | None
    rounds: int
    tokens_per_joule: float | None
    tokens_per_joule_low: float | None
    tokens_per_joule_high: float | None
    energy_reason: str | None
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_position: list[int] | None
    mean_acceptance_length: float | None
    mean_acceptance_length_low: float | None
    mean_acceptance_length_high: float | None
    resolved_graph_mode: str | None
    resolved_draft_graph_mode: str | None
    graph_downgraded: bool | None
    draft_eager: bool | None
    async_scheduling_off: bool | None
    vllm_version: str | None
    gpu_name: str | None
    serving: dict | None
    empty_as_failed: bool
    source: str


def add(cell: PooledCell, result: StoredResult, *, job_id: int, pair_id: str | None = None) -> None:
    """Pool one repeat (one engine start, job ``job_id``) into ``cell``: its counters summed, and
    ``accepted_per_position`` position by position; its tokens/s (the median of its rounds) one more repeat
    of ``cell.repeats`` (and, run as half of the pair ``pair_id``, kept by it in ``cell.paired``); its serving
    figures, if any, one more of ``cell.serving``. Counts or speeds no run can make are left out, with a note."""
    cell.resolved_graph_modes.add(result.resolved_graph_mode or "?")
    cell.resolved_draft_graph_modes.add(result.resolved_draft_graph_mode or "?")
    cell.downgraded |= bool(result.graph_downgraded)
    cell.draft_eager |= bool(result.draft_eager)
    if result.async_scheduling_off is not None:
        cell.async_off += result.async_scheduling_off
        cell.async_kept += not result.async_scheduling_off
    if (why := impossible_counts(result)) is not None:
        cell.notes.append(f"job {job_id}: {why}; its acceptance is left out")
    else:
        cell.drafts += result.num_drafts
        cell.draft_tokens += result.num_draft_tokens
        cell.accepted += result.num_accepted_tokens
        for i, at in enumerate(result.accepted_per_position or []):
            if i == len(cell.accepted_per_position):
                cell.accepted_per_position.append(0)
            cell.accepted_per_position[i] += at
        if result.mean_acceptance_length is not None:
            cell.lengths.append((result.mean_acceptance_length, result.mean_acceptance_length_low, result.mean_acceptance_length_high))
    speeds = (result.tokens_per_s, result.tokens_per_s_low, result.tokens_per_s_high)
    if not all(speed is None or plausible_speed(speed) for speed in speeds):
        shown = ", ".join(f"{speed:g}" for speed in speeds if speed is not None)
        cell.notes.append(f"job {job_id}: tokens/s ({shown}) beyond {MAX_TOKENS_PER_S:g}, what no GPU does; left out")
    elif result.tokens_per_s > 0:
        cell.repeats.append(RepeatSpeed(result.tokens_per_s, result.tokens_per_s_low, result.tokens_per_s_high, result.rounds,
                                        result.tokens_per_s_level))
        if pair_id is not None:
            cell.paired[pair_id] = result.tokens_per_s
    add_energy(cell, result, job_id=job_id)
    if result.serving:
        cell.serving.append(result.serving)
        cell.empty_as_failed += result.empty_as_failed
    cell.vllm_versions.add(result.vllm_version or "?")
    cell.sources.add(result.source)
    if result.gpu_name:
        cell.gpu_names.add(result.gpu_name)


def add_requests(cell: PooledCell, stored: dict | None) -> None:
    """Pool one start's stored per-request sums (``Result.request_acceptance``) into ``cell``, by adding them
    (``app.analysis.request_acceptance.pool``); a start without them (None) adds nothing and is not counted."""
    if (kept := request_acceptance.from_json(stored)) is not None:
        cell.requests = request_acceptance.pool([kept] if cell.requests is None else [cell.requests, kept])
        cell.recorded_starts += 1


def add_energy(cell: PooledCell, result: StoredResult, *, job_id: int) -> None:
    """One repeat's tokens/J into ``cell.energy_repeats`` (its interval the order statistics of its rounds), or why it
    has none into ``cell.energy_reasons``; one beyond ``MAX_TOKENS_PER_JOULE`` is left out with a note."""
    if result.tokens_per_joule is None or result.tokens_per_joule <= 0:
        cell.energy_reasons.add(result.energy_reason or NOT_RECORDED)
    elif result.tokens_per_joule > MAX_TOKENS_PER_JOULE:
        cell.notes.append(f"job {job_id}: {result.tokens_per_joule:g} tokens/J beyond {MAX_TOKENS_PER_JOULE:g}; left out")
    else:
        cell.energy_repeats.append(RepeatSpeed(result.tokens_per_joule, result.tokens_per_joule_low,
                                               result.tokens_per_joule_high, result.rounds))


def impossible_counts(row: StoredResult) -> str | None:
    """Why a stored row's spec-decode counters cannot come from one run (its intervals would fail), or None."""
    per_position = row.accepted_per_position or []
    if min(row.num_drafts, row.num_draft_tokens, row.num_accepted_tokens, *per_position) < 0:
        return "a negative count"
    if row.num_accepted_tokens > row.num_draft_tokens:
        return f"{row.num_accepted_tokens} accepted of {row.num_draft_tokens} draft tokens"
    if any(at > row.num_drafts for at in per_position):
        return f"a position accepted more than the {row.num_drafts} drafts"
    return None


def pairs(base: PooledCell, head: PooledCell) -> list[tuple[float, float]]:
    """``(base, head)`` tokens/s of each pair of starts the two cells ran as its halves, in pair id order."""
    return [(base.paired[p], head.paired[p]) for p in sorted(base.paired.keys() & head.paired.keys())]


def sample(cell: PooledCell) -> CellSample:
    """The cell as the verdicts read it (``app.analysis.verdicts``): one tokens/s per repeat, the median of its
    rounds, since rounds of one engine start share its luck; the summed counters."""
    return CellSample(
        tokens_per_s=[r.median for r in cell.repeats], drafts=cell.drafts, draft_tokens=cell.draft_tokens,
        accepted_tokens=cell.accepted, accepted_per_position=tuple(cell.accepted_per_position),
    )
