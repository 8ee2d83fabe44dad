"""The contract between the service and ``runners/cell.py``: what a cell is asked to run, and what it reports.

``runners/cell.py`` cannot import this (it runs inside the build's own Python, with only the standard
library and vLLM), so it writes plain JSON; the worker validates that JSON against ``CellResult``
before anything reaches the service.
"""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, model_validator

from app.enums import AttentionBackend, GpuKind, GraphMode

CELL_SCHEMA_VERSION = 1


class Workload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(min_length=1, description="Spec-Bench JSONL file, read where the worker runs")
    categories: list[str] = Field(default_factory=list, description="Keep only these categories; empty keeps all")
    num_prompts: int = Field(default=32, ge=1, le=100_000)
    max_tokens: int = Field(default=128, ge=1, le=1_000_000)
    temperature: float = Field(default=0.0, ge=0.0, le=10.0)
    seed: int = Field(default=0, ge=0)
    warmup_prompts: int = Field(default=2, ge=0, le=1000, description="Prompts run once before measuring")


class CellSpec(BaseModel):
    """One cell exactly as ``runners/cell.py`` receives it (also the job's canonical config)."""

    model_config = ConfigDict(extra="forbid")

    build: str
    gpu_kind: GpuKind
    model: str
    tokenizer: str | None = None
    workload: Workload
    # None runs the baseline: the same engine without speculation.
    speculative: dict[str, Any] | None
    attention_backend: AttentionBackend
    cudagraph_mode: GraphMode
    engine_args: dict[str, Any] = Field(default_factory=dict)
    timeout_s: float = Field(default=900.0, gt=0)


class SpecCounters(BaseModel):
    """vLLM's spec-decode counters over the measured run (warm-up subtracted)."""

    num_drafts: NonNegativeInt
    num_draft_tokens: NonNegativeInt
    num_accepted_tokens: NonNegativeInt
    accepted_per_position: list[NonNegativeInt] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> "SpecCounters":
        # The service derives rates and Wilson intervals from these; counts that cannot come from
        # one run (more accepted than drafted) are refused here (422) instead of failing there.
        if self.num_drafts and not self.num_draft_tokens:
            raise ValueError(f"{self.num_drafts} drafts but no draft tokens")
        if self.num_accepted_tokens > self.num_draft_tokens:
            raise ValueError(f"{self.num_accepted_tokens} accepted tokens exceed {self.num_draft_tokens} draft tokens")
        if any(n > self.num_drafts for n in self.accepted_per_position):
            raise ValueError(f"a position accepted more than the {self.num_drafts} drafts: {self.accepted_per_position}")
        return self


class RequestOutcome(BaseModel):
    """One request of the measured run: enough to bootstrap and to compare against the baseline."""

    num_output_tokens: NonNegativeInt
    fingerprint: str
    num_drafts: NonNegativeInt | None = None
    num_accepted_tokens: NonNegativeInt | None = None


class Versions(BaseModel):
    model_config = ConfigDict(extra="allow")

    vllm: str | None = None
    vllm_commit: str | None = None
    torch: str | None = None
    cuda: str | None = None
    flashinfer: str | None = None
    python: str | None = None
    gpu_name: str | None = None
    compute_capability: str | None = None
    driver: str | None = None


class CellResult(BaseModel):
    """The JSON ``runners/cell.py`` writes when the cell ran to the end."""

    schema_version: int = CELL_SCHEMA_VERSION
    engine_start_s: NonNegativeFloat
    warmup_s: NonNegativeFloat
    generation_s: NonNegativeFloat
    num_requests: NonNegativeInt
    prompt_tokens: NonNegativeInt
    output_tokens: NonNegativeInt
    tokens_per_s: NonNegativeFloat
    requests_per_s: NonNegativeFloat
    spec: SpecCounters | None = None
    requests: list[RequestOutcome] = Field(default_factory=list)
    output_fingerprint: str
    versions: Versions = Field(default_factory=Versions)


class Ran(BaseModel):
    """What the log says actually ran, beside what was requested."""

    backend: str | None = None
    draft_backend: str | None = None
    graph_mode: str | None = None
    draft_graph_mode: str | None = None
    graph_downgraded: bool = False
    draft_eager: bool = False
    downgrades: list[str] = Field(default_factory=list)


class CellOutcome(BaseModel):
    """What the worker reports for a finished cell: a result, or how the process died."""

    result: CellResult | None = None
    ran: Ran = Field(default_factory=Ran)
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    duration_s: NonNegativeFloat = 0.0
    # Set when the worker itself could not run the cell (bad build path, unreadable result JSON).
    error: str | None = None
