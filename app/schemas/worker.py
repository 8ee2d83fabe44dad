"""The worker protocol: register, claim, heartbeat, upload the log, complete."""

from datetime import datetime
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from app.enums import BuildKind, GpuKind, JobState
from app.models import Build, Worker
from app.schemas.base import Input
from app.schemas.cell import JobOutcome
from app.schemas.ids import Id
from app.schemas.physical import MAX_GPUS
from app.schemas.sweep import axis
from app.schemas.text import reported, stored
from app.schemas.times import PlausibleTime


class BuildFactsIn(Input):
    """How a build was made (``draftbench build create`` writes them to its build.json); all optional."""

    kind: BuildKind | None = None
    base: stored(Build.base) | None = None
    patch_sha256: stored(Build.patch_sha256, pattern=r"^[0-9a-f]{64}$") | None = None
    source: stored(Build.source) | None = None
    commit: stored(Build.commit) | None = None
    committed_at: PlausibleTime | None = Field(default=None, description="When the commit was made (ISO 8601 with a zone)")


class BuildInfo(BuildFactsIn):
    label: stored(Build.label, min_length=1, pattern=r"^[A-Za-z0-9._+-]+$")
    # What the build check found, not a name anyone chose: a long development version is cut, not refused.
    vllm_version: reported(Build.vllm_version) | None = None


class RegisterRequest(Input):
    name: stored(Worker.name, min_length=1)
    host: stored(Worker.host, min_length=1)
    gpu_kinds: axis(GpuKind) = Field(min_length=1, max_length=len(GpuKind))
    # GPUs this worker process may use at once: it claims only jobs needing at most this many. Strict: JSON's true and
    # "8" are not a count (pydantic's lax integer read them as 1 and 8).
    gpu_count: int = Field(default=0, ge=0, le=MAX_GPUS, strict=True)
    builds: list[BuildInfo] = Field(min_length=1, max_length=64)

    @field_validator("builds")
    @classmethod
    def _each_label_once(cls, builds: list[BuildInfo]) -> list[BuildInfo]:
        # Two entries of one label made the second a 409 against a version the first had just recorded.
        labels = [build.label for build in builds]
        twice = next((i for i, label in enumerate(labels) if label in labels[:i]), None)
        if twice is not None:
            raise PydanticCustomError("label_twice", "builds[{index}]: build {label} is listed twice; list each build once",
                                      {"index": twice, "label": repr(labels[twice])})
        return builds

    @model_validator(mode="after")
    def _a_gpu_kind_brings_a_gpu(self) -> "RegisterRequest":
        # A worker that names a GPU kind has at least one GPU, even if it left the count out.
        if self.gpu_count == 0 and any(kind is not GpuKind.CPU for kind in self.gpu_kinds):
            self.gpu_count = 1
        return self


class BuildOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    label: str
    vllm_version: str | None
    kind: str | None = None
    base: str | None = None
    patch_sha256: str | None = None
    source: str | None = None
    commit: str | None = None
    committed_at: datetime | None = None
    created_at: datetime
    last_seen_at: datetime


class WorkerOut(BaseModel):
    id: int
    name: str
    host: str
    gpu_kinds: list[str]
    gpu_count: int
    builds: list[str]
    registered_at: datetime
    last_heartbeat_at: datetime
    alive: bool


class WorkerRegistered(WorkerOut):
    credential: str = Field(
        description="This worker's own bearer token, shown once: claim, heartbeat, log and complete need it, "
        "and it acts for this worker only"
    )
    lease_seconds: float = Field(
        description="A worker not heard from (heartbeat or claim) for this long is taken for dead and its jobs requeued"
    )


class ClaimedJob(BaseModel):
    job_id: int
    sweep_id: int
    attempt: int
    # The cell spec to run (app.schemas.cell.CellSpec). Services before it was named spec sent it as cell.
    spec: dict[str, Any] = Field(validation_alias=AliasChoices("spec", "cell"))
    # GPUs the cell takes (tensor x pipeline parallel); the worker sets CUDA_VISIBLE_DEVICES to that many.
    gpus_needed: int = 1

    # Marked deprecated in the schema only: pydantic's own deprecation would warn at every answer it writes.
    @computed_field(description="Deprecated: the spec under its old name, for deployed workers", json_schema_extra={"deprecated": True})
    @property
    def cell(self) -> dict[str, Any]:
        return self.spec


class HeartbeatRequest(Input):
    job_ids: list[Id] = Field(default_factory=list, max_length=1024)


class HeartbeatResponse(BaseModel):
    # Jobs the worker must stop: cancelled, or requeued after its lease lapsed.
    stop: list[int]


class CompleteRequest(Input):
    outcome: JobOutcome


class JobOut(BaseModel):
    id: int
    sweep_id: int
    cell_index: int
    repeat: int
    build: str
    gpu_kind: str
    backend: str
    graph_mode: str
    method: str | None
    config_hash: str
    state: JobState
    attempts: int
    max_attempts: int
    gpus_needed: int
    worker_id: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    # Paired runs (app.sweeps.pairing): the pair and which of its two jobs runs first (0); None when run alone.
    pair_id: str | None = None
    pair_order: int | None = None
    # The cell spec the job runs (app.schemas.cell.CellSpec).
    spec: dict[str, Any]

    model_config = ConfigDict(from_attributes=True)

    @computed_field(description="Deprecated: the spec under its old name", json_schema_extra={"deprecated": True})
    @property
    def config(self) -> dict[str, Any]:
        return self.spec
