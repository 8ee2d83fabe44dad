"""The contract between the service and ``runners/cell.py``: what a cell is asked to run, and what it reports.

``runners/cell.py`` cannot import this (it runs inside the build's own Python, with only the standard
library and vLLM), so it writes plain JSON; the worker validates that JSON against ``CellResult``
before anything reaches the service. ``CELL_SCHEMA_VERSION`` is repeated there as ``SCHEMA_VERSION``
and tied to this one by ``tests/runners/test_cell.py``.
"""

import itertools
import math
from typing import Any

from pydantic import AliasChoices, ConfigDict, Field, model_validator

from app.config import DEFAULT_CELL_TIMEOUT_S
from app.enums import AttentionBackend, BuiltinDataset, GpuKind, GraphMode, Mode
from app.models import Job, Result
from app.schemas.base import Input
from app.schemas.physical import (
    MAX_REQUESTS_PER_S,
    MAX_TOKENS_PER_JOULE,
    MAX_TOKENS_PER_S,
    Count,
    Joules,
    Milliseconds,
    RequestsPerS,
    Seconds,
    TokensPerS,
)
from app.schemas.text import clean, reported, stored

# 2: CellSpec.backend/graph_mode (were attention_backend/cudagraph_mode), CellResult.spec_decode (was spec).
# 3: measured rounds, the cell's wall time, the model runner, serving mode (CellSpec.mode, concurrency, env).
# 4: import_s (offline cells: the seconds before the engine, spent importing vLLM).
# 5: Serving.empty; a stream of tokens that decode to no text is completed (before: failed, its tokens uncounted).
# 6: each offline round's passes (Round.passes: a start's interval from them, app.analysis.passes) and the harness
#    the rounds ran under (CellResult.harness: garbage collection, the clock, a fork server's cell).
# 7: each offline request's prompt category, and its counters (drafts, draft tokens, accepted, per position) summed
#    over every measured pass, so the requests add up to the rounds' counters (before: the first pass's, no tokens).
# 8: each round's joules where NVML reports them (Round.energy_j), and the measured rounds' energy or why it is
#    missing (CellResult.energy).
# 9: each serving request's prompt category and its counters summed over every measured request of its prompt, as
#    offline from 7 (vLLM's per-request counts on its stream's final usage chunk); kept only when every measured
#    request reported them, in both modes.
CELL_SCHEMA_VERSION = 9
# A round's passes kept at most: a result stays within the report's size limit (a pass is ~50 bytes of JSON).
MAX_PASSES = 10_000
# How far a round's passes' seconds may add up away from the round's (float sums of ~1e4 terms).
PASS_SUM_TOLERANCE = 1e-6
# Clients at once, in serving mode.
MAX_CONCURRENCY = 4096
# vLLM's environment variables: a name, and a value.
EnvName = stored(Job.env, 128, min_length=1)
EnvValue = stored(Job.env, 1024)


class Workload(Input):
    """The prompts a cell runs and how: a prompt file, the prompts shipped with draftbench, or random tokens."""

    dataset: stored(Job.spec, 1024, min_length=1) = Field(
        default=BuiltinDataset.DRAFTBENCH.value,
        description="'draftbench' (the prompts shipped in runners/prompts), 'random' (random token ids, as "
        "`vllm bench --dataset-name random`), or a path where the worker runs: Spec-Bench JSONL "
        "(question_id, category, turns) or ShareGPT JSON (a list of {conversations: [{from, value}]})",
    )
    categories: list[stored(Job.spec, 64, min_length=1)] = Field(
        default_factory=list, max_length=64, description="Keep only these categories; empty keeps all"
    )
    num_prompts: int = Field(default=32, ge=1, le=100_000)
    max_tokens: int = Field(default=128, ge=1, le=1_000_000, description="Output tokens per request (EOS ignored)")
    input_len: int | None = Field(
        default=None, ge=1, le=1_000_000, description="random only: prompt tokens per request (default 128)"
    )
    range_ratio: float | None = Field(
        default=None, ge=0.0, lt=1.0, description="random only: prompt lengths uniform in input_len x [1-r, 1+r]"
    )
    temperature: float = Field(default=0.0, ge=0.0, le=10.0)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    # Added after configs were stored and hashed: left out of every dump at its default (what ran before),
    # so a stored config, its hash and its history stay what they were.
    request_seeds: bool = Field(
        default=True,
        exclude_if=lambda seeded: seeded is True,
        description="Give each request its own sampling seed (seed + its index), so batching cannot change "
        "outputs; false sends requests unseeded, as `vllm bench` does (at temperature > 0 vLLM samples seeded "
        "requests one at a time, which costs throughput)",
    )
    warmup_prompts: int | None = Field(
        default=None, ge=0, le=100_000,
        description="Prompts run once before measuring, at the measured batch size or concurrency; default: "
        "num_prompts (one whole pass, so the rounds meet no batch shape the warm-up did not compile)",
    )
    rounds: int = Field(
        default=5, ge=1, le=1000, description="Measured rounds inside one engine start (tokens/s: their median)"
    )
    min_window_s: float = Field(
        default=5.0, ge=0.0, le=3600.0, description="Each round repeats the workload until it has run this long"
    )

    @model_validator(mode="after")
    def _warmup_defaults_to_one_pass(self) -> "Workload":
        # Resolved here, not in the cell, so the canonical config (and its hash) says what ran.
        if self.warmup_prompts is None:
            self.warmup_prompts = self.num_prompts
        return self

    @model_validator(mode="after")
    def _random_fields_only_for_random(self) -> "Workload":
        if self.dataset == BuiltinDataset.RANDOM:
            if self.categories:
                raise ValueError("categories select prompts of a file; the random dataset has none")
            self.input_len = self.input_len or 128
            self.range_ratio = self.range_ratio or 0.0
        elif self.input_len is not None or self.range_ratio is not None:
            raise ValueError("input_len and range_ratio apply to dataset 'random' only")
        return self


class CellSpec(Input):
    """One cell exactly as ``runners/cell.py`` receives it (also the job's canonical config)."""

    build: stored(Job.build, min_length=1)
    gpu_kind: GpuKind
    model: stored(Job.spec, 1024, min_length=1)
    tokenizer: stored(Job.spec, 1024) | None = None
    workload: Workload
    # None runs the baseline: the same engine without speculation.
    speculative: dict[str, Any] | None
    backend: AttentionBackend = Field(validation_alias=AliasChoices("backend", "attention_backend"))
    graph_mode: GraphMode = Field(validation_alias=AliasChoices("graph_mode", "cudagraph_mode"))
    engine_args: dict[str, Any] = Field(default_factory=dict)
    timeout_s: float = Field(default=DEFAULT_CELL_TIMEOUT_S, gt=0)
    mode: Mode = Mode.OFFLINE
    # Serving mode: how many clients send requests at once.
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)
    # vLLM's environment variables for this cell (app.sweeps.engine_args.VLLM_ENV).
    env: dict[EnvName, EnvValue] = Field(default_factory=dict)

    @property
    def method(self) -> str | None:
        return None if self.speculative is None else self.speculative["method"]


class SpecDecodeCounters(Input):
    """vLLM's spec-decode counters over the measured run (warm-up subtracted)."""

    model_config = ConfigDict(extra="ignore")

    num_drafts: Count
    num_draft_tokens: Count
    num_accepted_tokens: Count
    accepted_per_position: list[Count] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> "SpecDecodeCounters":
        # The service derives rates and Wilson intervals from these; counts that cannot come from
        # one run (more accepted than drafted) are refused here (422) instead of failing there.
        if self.num_drafts and not self.num_draft_tokens:
            raise ValueError(f"{self.num_drafts} drafts but no draft tokens")
        if self.num_accepted_tokens > self.num_draft_tokens:
            raise ValueError(f"{self.num_accepted_tokens} accepted tokens exceed {self.num_draft_tokens} draft tokens")
        if any(n > self.num_drafts for n in self.accepted_per_position):
            raise ValueError(f"a position accepted more than the {self.num_drafts} drafts: {self.accepted_per_position}")
        return self


class MeasuredRequest(Input):
    """One request of the workload: enough to bootstrap, to compare against the baseline and, from schema 7, to read
    acceptance by prompt category. Its counters are summed over the measured passes; none where vLLM reports no
    per-request metrics. Accepted tokens beyond draft tokens are kept: a counting bug is a finding
    (``app.analysis.counters``), not a refusal."""

    model_config = ConfigDict(extra="ignore")

    num_output_tokens: Count
    fingerprint: reported(Result.raw, 128)
    category: reported(Result.raw, 200) | None = None
    num_drafts: Count | None = None
    num_draft_tokens: Count | None = None
    num_accepted_tokens: Count | None = None
    accepted_per_position: list[Count] | None = Field(default=None, max_length=64)


class Pass(Input):
    """One run of the workload inside a round (one ``llm.generate`` or ``llm.chat`` call): its seconds, from the end
    of the pass before it (or the round's start), and its output tokens."""

    model_config = ConfigDict(extra="ignore")

    seconds: Seconds
    output_tokens: Count


class Round(Input):
    """One measured round: the workload repeated until the round's window was filled."""

    model_config = ConfigDict(extra="ignore")

    seconds: Seconds
    output_tokens: Count
    num_requests: Count
    spec_decode: SpecDecodeCounters | None = None
    # Schema 6, offline rounds: each pass, in the order they ran; they tile the round. Empty for serving rounds,
    # older files, and a round of more than MAX_PASSES passes; left out of dumps when empty, as import_s is.
    passes: list[Pass] = Field(default_factory=list, max_length=MAX_PASSES, exclude_if=lambda passes: not passes)
    # Schema 7: the joules the cell's GPUs used during the round (NVML); None where they were not read, and left
    # out of dumps then, so older results export as they were.
    energy_j: Joules | None = Field(default=None, exclude_if=lambda joules: joules is None)

    @model_validator(mode="after")
    def _physical(self) -> "Round":
        # The service stores the rounds' median of output_tokens / seconds, not the cell's own tokens_per_s: a round of
        # tokens in no time was stored as 0 tokens/s.
        if self.seconds == 0 and (self.output_tokens or self.num_requests):
            raise ValueError(f"{self.output_tokens} tokens and {self.num_requests} requests in 0 s: a round that ran takes time")
        if self.seconds > 0 and self.output_tokens / self.seconds > MAX_TOKENS_PER_S:
            raise ValueError(f"{self.output_tokens} tokens in {self.seconds} s exceed {MAX_TOKENS_PER_S:g} tokens/s")
        if self.energy_j and self.output_tokens / self.energy_j > MAX_TOKENS_PER_JOULE:
            raise ValueError(f"{self.output_tokens} tokens on {self.energy_j} J exceed {MAX_TOKENS_PER_JOULE:g} tokens/J")
        if self.seconds > 0 and self.num_requests / self.seconds > MAX_REQUESTS_PER_S:
            raise ValueError(f"{self.num_requests} requests in {self.seconds} s exceed {MAX_REQUESTS_PER_S:g} requests/s")
        return self

    @model_validator(mode="after")
    def _passes_tile_the_round(self) -> "Round":
        # The interval resamples the passes as the round's parts (app.analysis.passes.start_speed): parts that do
        # not add up to the round would give an interval around another number than the stored median.
        if not self.passes:
            return self
        tokens = sum(p.output_tokens for p in self.passes)
        if tokens != self.output_tokens:
            raise ValueError(f"the passes' {tokens} output tokens are not the round's {self.output_tokens}")
        seconds = math.fsum(p.seconds for p in self.passes)
        if abs(seconds - self.seconds) > PASS_SUM_TOLERANCE * max(1.0, self.seconds):
            raise ValueError(f"the passes' {seconds} s are not the round's {self.seconds} s")
        return self


class Harness(Input):
    """What the cell did about its own noise while it measured (schema 6; ``runners/cell.py`` says why each)."""

    model_config = ConfigDict(extra="ignore")

    # gc.collect() and gc.freeze() after the warm-up, before the first round.
    gc_freeze: bool
    # The collector off during each pass, on between passes.
    gc_pause: bool
    # Collections of generations 0, 1 and 2 during the rounds (counted by gc.callbacks).
    gc_collections: list[Count] = Field(default_factory=list, max_length=3)
    # time.get_clock_info("perf_counter").implementation: what timed the passes.
    clock: reported(Result.raw, 128) | None = None
    # The CPUs the cell's process may run on (its affinity), which vLLM's processes inherit.
    cpus: Count | None = None
    # The cell's process was forked from its build's fork server (runners/forkserver.py): vLLM was imported
    # before the cell started, and import_s is the server's import for the cell that started it, else ~0.
    forked: bool = False
    # vLLM was let reuse its configuration's KV cache size from an earlier start instead of profiling memory
    # (VLLM_ENABLE_STARTUP_PLAN, the worker's default): whether it did, its log says ("Applying persisted startup plan").
    startup_plan: bool = False


class Energy(Input):
    """What the GPUs' energy counters said of the measured rounds (schema 8; ``runners/cellkit.EnergyMeter``)."""

    model_config = ConfigDict(extra="ignore")

    # The rounds' joules summed; None unless every round has its own.
    joules: Joules | None = None
    # The UUIDs of the GPUs read (a tensor-parallel cell sums them).
    gpus: list[reported(Result.raw, 128)] = Field(default_factory=list, max_length=1024)
    # Why there are no joules ("not reported (NVML: Not Supported)"); None when there are.
    reason: reported(Result.energy_reason) | None = None


class Percentiles(Input):
    """Milliseconds; a file of ``vllm bench serve`` holds only the percentiles it was asked for."""

    p50: Milliseconds
    p90: Milliseconds | None = None
    p99: Milliseconds | None = None

    @model_validator(mode="after")
    def _ascending(self) -> "Percentiles":
        given = [(name, value) for name, value in (("p50", self.p50), ("p90", self.p90), ("p99", self.p99)) if value is not None]
        for (low_name, low), (high_name, high) in itertools.pairwise(given):
            if low > high:
                raise ValueError(f"{low_name} ({low:g} ms) exceeds {high_name} ({high:g} ms): percentiles ascend")
        return self


class Serving(Input):
    """What clients saw in serving mode (milliseconds), as ``vllm bench serve`` reports it."""

    model_config = ConfigDict(extra="ignore")

    concurrency: int = Field(ge=1, le=MAX_CONCURRENCY)
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    itl_ms: Percentiles
    output_tokens_per_s: TokensPerS
    requests_per_s: RequestsPerS
    completed: Count
    failed: Count = 0
    # Completed requests whose tokens decoded to no text; None from a runner before cell schema 5, which
    # counted them as failed (and left their tokens out of tokens/s).
    empty: Count | None = None


class Versions(Input):
    """What the cell ran on; vLLM's version and the GPU's name also get columns of their own."""

    model_config = ConfigDict(extra="allow")

    vllm: reported(Result.vllm_version) | None = None
    vllm_commit: reported(Result.versions) | None = None
    torch: reported(Result.versions) | None = None
    cuda: reported(Result.versions) | None = None
    flashinfer: reported(Result.versions) | None = None
    python: reported(Result.versions) | None = None
    gpu_name: reported(Result.gpu_name) | None = None
    compute_capability: reported(Result.versions) | None = None
    driver: reported(Result.versions) | None = None

    @model_validator(mode="before")
    @classmethod
    def _clean_extras(cls, data: Any) -> Any:
        # Keys beyond the fields above are kept as they came, once storable.
        return clean(data)


class CellResult(Input):
    """The JSON ``runners/cell.py`` writes when the cell ran to the end (schema 1 files read as well)."""

    model_config = ConfigDict(extra="ignore")

    # A runner writes the schema it knows; one past this service's is refused (a future runner's fields are not read).
    schema_version: int = Field(default=CELL_SCHEMA_VERSION, ge=1, le=CELL_SCHEMA_VERSION)
    engine_start_s: Seconds
    warmup_s: Seconds
    generation_s: Seconds
    num_requests: Count
    prompt_tokens: Count
    output_tokens: Count
    tokens_per_s: TokensPerS
    requests_per_s: RequestsPerS
    # Summed over the measured rounds; each round's own counts are in ``rounds``.
    spec_decode: SpecDecodeCounters | None = Field(default=None, validation_alias=AliasChoices("spec_decode", "spec"))
    requests: list[MeasuredRequest] = Field(default_factory=list)
    output_fingerprint: reported(Result.output_fingerprint)
    versions: Versions = Field(default_factory=Versions)
    # Schema 3 (older files: one round, the whole generation window).
    rounds: list[Round] = Field(default_factory=list, max_length=1000)
    wall_s: Seconds | None = Field(default=None, description="The cell process's wall time up to its result")
    # Schema 4. None for serving cells (their server imports vLLM inside engine_start_s) and older files; left
    # out of dumps then, so a stored result of schema 3 exports and imports back as it was.
    import_s: Seconds | None = Field(
        default=None, exclude_if=lambda seconds: seconds is None,
        description="Offline cells: seconds from the cell's start until vLLM's engine API was imported",
    )
    model_runner: reported(Result.model_runner) | None = None
    serving: Serving | None = None
    # Schema 6; None (and left out of dumps) for older files.
    harness: Harness | None = Field(default=None, exclude_if=lambda harness: harness is None)
    # Schema 7; None (and left out of dumps) for older files.
    energy: Energy | None = Field(default=None, exclude_if=lambda energy: energy is None)


class Resolved(Input):
    """What the log says ran, beside what the cell requested (``app/vllmlog/ran.py``)."""

    resolved_backend: reported(Result.resolved_backend) | None = None
    resolved_draft_backend: reported(Result.resolved_draft_backend) | None = None
    resolved_graph_mode: reported(Result.resolved_graph_mode) | None = None
    resolved_draft_graph_mode: reported(Result.resolved_draft_graph_mode) | None = None
    graph_downgraded: bool = False
    draft_eager: bool = False
    # vLLM said it turned its asynchronous scheduling off (``draft_model`` on vLLM 0.26 does): steps then wait on the
    # CPU's scheduling, so such a cell's speedup over a baseline that kept it is not the drafting's alone.
    async_scheduling_off: bool = False
    # The log lines that moved the graph mode or the backend away from the request, verbatim.
    downgrades: list[reported(Result.ran, 2000)] = Field(default_factory=list, max_length=100)


class JobOutcome(Input):
    """What the worker reports for a job: its cell's result, or how the cell's process died."""

    result: CellResult | None = None
    resolved: Resolved = Field(default_factory=Resolved)
    exit_code: int | None = Field(default=None, ge=-(2**31), le=2**31 - 1)
    signal: int | None = Field(default=None, ge=0, le=255)
    timed_out: bool = False
    duration_s: Seconds = 0.0
    # Set when the worker itself could not run the cell (bad build path, unreadable result JSON).
    error: reported(Job.error, 4000) | None = None
