"""What the API returns about results and crashes."""

from datetime import datetime

from pydantic import BaseModel

from app.enums import CrashKind


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
    engine_start_s: float
    generation_s: float
    num_requests: int
    output_tokens: int
    tokens_per_s: float
    requests_per_s: float
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
    # Against the sweep's baseline cell (same GPU, backend, graph mode and repeat), when it ran.
    speedup: float | None = None
    lossless_share: float | None = None
    output_fingerprint: str
    vllm_version: str | None
    gpu_name: str | None
    created_at: datetime


class CrashGroupOut(BaseModel):
    signature: str
    kind: CrashKind
    exception_type: str | None
    message: str
    frames: list[str]
    first_seen: datetime
    last_seen: datetime
    count: int


class CrashCell(BaseModel):
    job_id: int
    sweep_id: int
    gpu_kind: str
    backend: str
    graph_mode: str
    method: str | None
    build: str
    log: str


class CrashGroupDetail(CrashGroupOut):
    job_ids: list[int]
    builds: list[str]
    cells: list[CrashCell]
