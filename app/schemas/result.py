"""What the API returns about results (crash groups: app.crashes.schemas)."""

from datetime import datetime

from pydantic import BaseModel, Field

from app.enums import AlarmKind, ResultSource


class CategoryOut(BaseModel):
    """Acceptance of one prompt category's requests in one result, with 95 % intervals that take the request as the
    unit (``app.analysis.request_acceptance.category_acceptance`` states the formulas)."""

    category: str
    requests: int
    draft_tokens: int
    accepted: int
    rate: float
    rate_low: float
    rate_high: float
    length: float
    length_low: float
    length_high: float


class RequestsOut(BaseModel):
    """A result's requests by prompt category, and how many requests accepted what share of their draft tokens:
    ``rate_bins[i]`` counts the requests whose ``accepted / draft tokens`` lies in ``[i / 10, (i + 1) / 10)`` (1.0 in
    the last bin); ``no_drafts`` requests drafted nothing, ``over`` accepted more than they drafted."""

    categories: list[CategoryOut]
    rate_bins: list[int]
    no_drafts: int
    over: int


class ResultOut(BaseModel):
    """One measured job: what the cell requested (``backend``, ``graph_mode``) beside what ran
    (``resolved_*``), the spec-decode counters and the derived metrics."""

    job_id: int
    sweep_id: int
    sweep_name: str
    repeat: int
    config_hash: str
    build: str
    gpu_kind: str
    method: str | None
    backend: str
    graph_mode: str
    resolved_backend: str | None
    resolved_draft_backend: str | None
    resolved_graph_mode: str | None
    resolved_draft_graph_mode: str | None
    graph_downgraded: bool
    draft_eager: bool
    async_scheduling_off: bool | None = Field(
        default=None, description="vLLM's log said it turned asynchronous scheduling off; null: stored before it was read")
    mode: str = "offline"
    concurrency: int | None = None
    env: dict[str, str] = {}
    # Seconds spent importing vLLM before the engine started (offline cells of cell schema 4 on; else None).
    import_s: float | None = None
    engine_start_s: float
    generation_s: float
    num_requests: int
    output_tokens: int
    # Median over the measured rounds, and its interval at ``tokens_per_s_level``: a block bootstrap over the rounds'
    # ``passes`` where the cell kept them (cell schema 6), else the rounds' order-statistic interval (None with too
    # few rounds for it); ``rounds`` says how many, ``efficiency`` how much of the cell's wall time they were.
    tokens_per_s: float
    tokens_per_s_low: float | None = None
    tokens_per_s_high: float | None = None
    tokens_per_s_level: float | None = None
    rounds: int = 1
    passes: int | None = None
    measured_s: float | None = None
    efficiency: float | None = None
    # Where the GPU reports it (NVML): the joules over the measured rounds and output tokens per joule, the median
    # over the rounds with their order-statistic interval at ``tokens_per_joule_level``; None otherwise, and
    # ``energy_reason`` says why ("not reported (the CPU engine)").
    energy_j: float | None = None
    tokens_per_joule: float | None = None
    tokens_per_joule_low: float | None = None
    tokens_per_joule_high: float | None = None
    tokens_per_joule_level: float | None = None
    energy_reason: str | None = None
    model_runner: str | None = None
    requests_per_s: float
    serving: dict | None = None
    # Calibration cells: the per-position rates asked for, and whether a measured interval misses one.
    expected_per_position: list[float] | None = None
    calibration_miss: bool | None = None
    source: ResultSource = Field(default=ResultSource.CELL, description=(
        "What measured it: `cell` (draftbench's runner: rounds, intervals) or `vllm-bench` (an imported file of vLLM's "
        "own benchmark tools: one number, no rounds)"))
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_position: list[int]
    acceptance_rate: float | None
    acceptance_rate_low: float | None
    acceptance_rate_high: float | None
    mean_acceptance_length: float | None
    mean_acceptance_length_low: float | None
    mean_acceptance_length_high: float | None
    # Per draft position: [rate, low, high] (Wilson 95%), rate = accepted at the position / drafts.
    per_position: list[tuple[float, float, float]] = []
    # By prompt category and per request, where the cell recorded each request's counters (cell schema 7, a vLLM with
    # per-request metrics); None where it did not: not recorded, not zero.
    requests: RequestsOut | None = None
    # The rules of vLLM's counters this result breaks, as sentences (``app.analysis.counters``); empty when they agree
    # or the result counted nothing. Read from the stored counters on every read.
    counter_problems: list[str] = []
    # Against the sweep's baseline cell (same GPU, backend, graph mode and repeat), when it ran.
    speedup: float | None = None
    lossless_share: float | None = None
    # The graph-capture alarm on this result's cell (its repeats pooled) against its eager sibling; empty
    # when it did not fire or the cell has no eager sibling (GET /api/v1/alarms says by how much).
    alarm: list[AlarmKind] = []
    # Acceptance of exactly 0 or 1: a random-weight draft, or the target as its own draft.
    degenerate: bool = False
    output_fingerprint: str
    vllm_version: str | None
    gpu_name: str | None
    created_at: datetime


class MissedPosition(BaseModel):
    """A draft position (1: the first draft token) whose measured 95 % interval misses the rate asked for (None:
    the cell measured no such position, or asked for none there)."""

    number: int
    expected: float | None
    measured: float | None
    measured_low: float | None
    measured_high: float | None


class CalibrationMiss(BaseModel):
    """A calibration result (synthetic acceptance at known rates) that missed at some position."""

    job_id: int
    sweep_id: int
    build: str
    gpu_kind: str
    backend: str
    graph_mode: str
    method: str | None
    drafts: int
    positions: list[MissedPosition]
    sentence: str


class CalibrationMisses(BaseModel):
    count: int  # every stored miss in scope
    misses: list[CalibrationMiss]  # the newest, up to the limit asked
