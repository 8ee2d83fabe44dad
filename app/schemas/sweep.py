"""The sweep a developer submits, and what the API returns about it."""

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    computed_field,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.config import DEFAULT_CELL_TIMEOUT_S
from app.enums import AttentionBackend, GpuKind, GraphMode, JobState, Mode, SpecMethod, SweepState
from app.models import Sweep
from app.schemas.base import Input
from app.schemas.cell import MAX_CONCURRENCY, EnvName, EnvValue, Workload
from app.schemas.ids import Id
from app.schemas.physical import Rate
from app.schemas.text import stored

_RATES = TypeAdapter(Annotated[list[Rate], Field(max_length=64)])
MAX_K = 64
# Strict: JSON's true, "2" and 2.0 are not a k (pydantic's lax integer read them as 1 and 2).
K = Annotated[int, Field(ge=1, le=MAX_K, strict=True)]
_K = TypeAdapter(K)
# num_speculative_tokens as an axis: its schema; what checks it is SpeculativeConfig._k_or_axis.
KS = Annotated[list[K], Field(min_length=1, max_length=MAX_K, json_schema_extra={"uniqueItems": True})]
K_ALLOWED = f"an integer from 1 to {MAX_K}, or a non-empty list of distinct integers from 1 to {MAX_K}"


def _once(values: list) -> list:
    """An axis lists each value once: a repeated backend, graph mode, GPU kind, client count or env value made the same
    cells twice, each run and paid for."""
    seen: set[str] = set()
    twice: dict[str, None] = {}  # in the order given
    for value in values:
        key = str(getattr(value, "value", value))  # an enum by its name in the body
        if key in seen:
            twice[key] = None
        seen.add(key)
    if twice:
        raise PydanticCustomError("axis_repeats", "must list each value once; {twice} given twice", {"twice": ", ".join(twice)})
    return values


def axis(item: Any) -> Any:
    """A list of ``item`` that is an axis of the matrix: each value once (``uniqueItems`` in the schema)."""
    return Annotated[list[item], AfterValidator(_once), Field(json_schema_extra={"uniqueItems": True})]


class SpeculativeConfig(Input):
    """One vLLM ``speculative_config``; keys beyond these pass through to vLLM unchanged.

    ``num_speculative_tokens`` may be a list, an axis of the sweep: the config is one cell per k
    (app.sweeps.matrix.each_k), each cell's config holding one integer. The list is kept ascending.
    """

    model_config = ConfigDict(extra="allow")

    method: SpecMethod
    num_speculative_tokens: K | KS = Field(description=f"k: {K_ALLOWED} (a list is an axis: one cell per k, ascending)")
    model: stored(Sweep.spec, 1024) | None = None

    @field_validator("num_speculative_tokens", mode="wrap")
    @classmethod
    def _k_or_axis(cls, value: Any, _: ValidatorFunctionWrapHandler) -> int | list[int]:
        # One refusal for every wrong k, naming what is allowed, instead of a union's error per member.
        if not isinstance(value, list):
            return _k(value, "")
        if not 1 <= len(value) <= MAX_K:  # more than MAX_K cannot be distinct
            raise PydanticCustomError("k_axis", "must be {allowed}; got a list of {n} values", {"allowed": K_ALLOWED, "n": len(value)})
        ks = [_k(item, f"[{index}]") for index, item in enumerate(value)]
        twice = sorted({k for k in ks if ks.count(k) > 1})  # at most MAX_K x MAX_K steps
        if twice:
            raise PydanticCustomError("k_axis", "must be {allowed}; {twice} given twice",
                                      {"allowed": K_ALLOWED, "twice": ", ".join(map(str, twice))})
        return sorted(ks)

    @field_validator("model")
    @classmethod
    def _non_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="after")
    def _rates_are_rates(self) -> "SpeculativeConfig":
        # Calibration cells (rejection_sample_method: synthetic) pass these to vLLM and are held to them
        # (expected_per_position); a pass-through key, so that configs without it dump as they always did.
        rates = (self.__pydantic_extra__ or {}).get("synthetic_acceptance_rates")
        if rates is not None:
            try:
                _RATES.validate_python(rates)
            except ValidationError as exc:
                error = exc.errors()[0]
                where = "".join(f"[{part}]" for part in error["loc"])
                raise ValueError(f"synthetic_acceptance_rates{where}: {error['msg']}") from None
            # vLLM takes exactly one rate per drafted position; on a k axis each cell takes the first k of them
            # (app.sweeps.matrix.each_k), so the list covers the largest k.
            ks = self.num_speculative_tokens
            largest = ks if isinstance(ks, int) else max(ks)
            if len(rates) != largest:
                raise ValueError(f"synthetic_acceptance_rates: must give one rate per position up to num_speculative_tokens "
                                 f"({largest}, the largest k); got {len(rates)}")
        return self


def _k(value: Any, where: str) -> int:
    try:
        return _K.validate_python(value)
    except ValidationError as exc:
        raise PydanticCustomError("k_axis", "must be {allowed}; {where}{problem}", {
            "allowed": K_ALLOWED, "where": f"{where}: " if where else "", "problem": exc.errors()[0]["msg"]}) from None


class SweepSpec(Input):
    """The matrix: GPU kind x backend x graph mode x speculative config, each cell run ``repeats`` times.

    ``attention_backends``, ``cudagraph_modes`` and ``gpus`` are accepted as deprecated names of
    ``backends``, ``graph_modes`` and ``gpu_kinds``.
    """

    name: stored(Sweep.name, min_length=1)
    build: stored(Sweep.build, min_length=1)
    model: stored(Sweep.spec, 1024, min_length=1)
    tokenizer: stored(Sweep.spec, 1024) | None = None
    workload: Workload
    speculative: list[SpeculativeConfig] = Field(min_length=1, max_length=10_000)
    backends: axis(AttentionBackend) = Field(
        min_length=1, validation_alias=AliasChoices("backends", "attention_backends"), description="Attention backends of the target"
    )
    graph_modes: axis(GraphMode) = Field(
        min_length=1, validation_alias=AliasChoices("graph_modes", "cudagraph_modes"), description="CUDA-graph modes requested"
    )
    gpu_kinds: axis(GpuKind) = Field(min_length=1, validation_alias=AliasChoices("gpu_kinds", "gpus"))
    repeats: int = Field(default=1, ge=1, le=100, description="Separate engine starts of each cell")
    mode: Mode = Field(default=Mode.OFFLINE, description="offline (LLM.generate) or serve (vLLM's OpenAI server)")
    concurrency: axis(Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]) = Field(
        default_factory=list, max_length=32,
        description="serve mode: an axis of client counts, e.g. [1, 4, 16] (default [1])",
    )
    env: dict[EnvName, Annotated[axis(EnvValue), Field(min_length=1, max_length=16)]] = Field(
        default_factory=dict, max_length=16,
        description="An axis per vLLM variable: {VLLM_USE_V2_MODEL_RUNNER: ['0', '1']}",
    )
    engine_args: dict[str, Any] = Field(default_factory=dict)
    baseline: bool = Field(default=False, description="Also run each backend x mode x GPU without speculation")
    timeout_s: float = Field(default=DEFAULT_CELL_TIMEOUT_S, gt=0, le=24 * 3600)
    priority: int = Field(default=0, ge=-100, le=100)
    # Who and why: a pull request, a branch, a commit, free tags.
    pull_request: int | None = Field(default=None, ge=1, le=2**31 - 1)  # its column's 32-bit integers
    branch: stored(Sweep.branch) | None = None
    commit: stored(Sweep.commit) | None = None
    tags: list[stored(Sweep.tags, 100, min_length=1)] = Field(default_factory=list, max_length=50)
    submitted_by: stored(Sweep.submitted_by) | None = None
    reason: stored(Sweep.reason, 10_000) | None = None
    paired_with: Id | None = Field(
        default=None,
        description="A queued or running sweep of the same matrix (its build aside) whose starts this sweep's run "
        "beside, each cell and repeat back to back on one worker (a CI comparison's base)",
    )

    @model_serializer(mode="wrap")
    def _unpaired_as_before(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A sweep paired with none dumps as sweeps did before pairing existed: its stored spec and the hash an
        # Idempotency-Key is checked against stay what they were.
        data = handler(self)
        if data.get("paired_with") is None:
            data.pop("paired_with", None)
        return data

    @model_validator(mode="after")
    def _concurrency_is_for_serving(self) -> "SweepSpec":
        if self.concurrency and self.mode is not Mode.SERVE:
            raise ValueError("concurrency is an axis of mode 'serve'; offline cells run the workload as one batch")
        return self


# Spec fields that say who and why, which build, and what the sweep is paired with, not what runs: sweeps whose specs
# differ only in these run the same cells (a CI base is reused, or paired, on that ground).
NOT_MATRIX = frozenset(
    {"name", "build", "pull_request", "branch", "commit", "tags", "submitted_by", "reason", "priority", "paired_with"}
)


def matrix_of(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A stored spec (``SweepSpec.model_dump(mode="json")``) without its ``NOT_MATRIX`` fields: what runs."""
    return {key: value for key, value in spec.items() if key not in NOT_MATRIX}


class MoreCell(Input):
    """A cell of a paired sweep, by its index, and how many more pairs of starts it gets."""

    cell_index: int = Field(ge=0, le=2**31 - 1)
    pairs: int = Field(ge=1, le=100)


class MoreRequest(Input):
    """More paired starts for some cells of a paired sweep (and of its partner)."""

    cells: list[MoreCell] = Field(min_length=1, max_length=10_000)


class JobStatus(BaseModel):
    """Where one job of the sweep stands, and what its cell measured and ran once it succeeded."""

    job_id: int
    cell_index: int
    repeat: int
    gpu_kind: str
    backend: str
    graph_mode: str
    method: str | None
    mode: str = "offline"
    concurrency: int | None = None
    env: dict[str, str] = {}
    state: JobState
    attempts: int
    acceptance_rate: float | None = None
    tokens_per_s: float | None = None
    # What ran, as the cell's log told it (None until the cell succeeded).
    resolved_backend: str | None = None
    resolved_graph_mode: str | None = None
    graph_downgraded: bool = False
    draft_eager: bool = False
    crash_signature: str | None = None
    # Paired runs: the pair the job belongs to (its partner in the paired sweep has the same) and whether it runs
    # first (0) or second (1) of the two; None for a job that runs alone.
    pair_id: str | None = None
    pair_order: int | None = None


class SweepSummary(BaseModel):
    id: int
    name: str
    state: SweepState
    created_at: datetime
    build: str
    pull_request: int | None
    branch: str | None
    commit: str | None
    tags: list[str]
    counts: dict[str, int]
    total: int


class SweepDetail(SweepSummary):
    spec: dict[str, Any]
    jobs: list[JobStatus]
    # Why some jobs may wait: no live worker serves their GPU kind, build and GPU count (read fresh).
    warnings: list[str] = []
    # The sweep whose jobs this one's are paired with (either side of the pair), or None.
    paired_with: int | None = None
    # Device time its jobs took: the sum of (finished - started) x GPUs needed over the jobs that ended, a cell of
    # the CPU engine counting as one device; and how many jobs that sums (gpu_seconds / timed_jobs: a start's cost).
    gpu_seconds: float = 0.0
    timed_jobs: int = 0

    # Marked deprecated in the schema only: pydantic's own deprecation would warn at every answer it writes.
    @computed_field(description="Deprecated: the jobs under their old name", json_schema_extra={"deprecated": True})
    @property
    def cells(self) -> list[JobStatus]:
        return self.jobs
