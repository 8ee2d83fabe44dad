"""Typed SQLAlchemy 2.0 models: the only description of the tables besides the migrations."""

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Index,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from app.enums import AlarmKind, CheckOutcome, CrashKind, JobState, ResultSource, StepCall

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator):
    """Timezone-aware on every backend: SQLite keeps naive values, so they are read back as UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value

    def process_result_value(self, value, dialect):
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime(), dict[str, Any]: JSON, list[Any]: JSON}


def _enum(enum_cls: type) -> Enum:
    # Stored as plain strings (no native ENUM type) so adding a member needs no migration.
    return Enum(
        enum_cls,
        native_enum=False,
        create_constraint=False,
        length=32,
        values_callable=lambda e: [m.value for m in e],
    )


class Build(Base):
    """A vLLM build that some worker can run, by label (``vllm-0.32-cpu``)."""

    __tablename__ = "builds"

    id: Mapped[int] = mapped_column(primary_key=True)
    label: Mapped[str] = mapped_column(String(128), unique=True)
    vllm_version: Mapped[str | None] = mapped_column(String(64))
    # How it was made (app.builds.facts.BuildKind); None for an interpreter installed by hand.
    kind: Mapped[str | None] = mapped_column(String(16))
    # The build it was made from (a label or an interpreter), the pull request's patch, wheel or pip
    # requirement, and the commit it stands for: what a result of this build ran.
    base: Mapped[str | None] = mapped_column(String(255))
    patch_sha256: Mapped[str | None] = mapped_column(String(64))
    source: Mapped[str | None] = mapped_column(String(1024))
    commit: Mapped[str | None] = mapped_column(String(64))
    # When that commit was made: a cell's history runs in commit order, whatever order builds were measured in.
    committed_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(default=utcnow)


class Worker(Base):
    __tablename__ = "workers"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    host: Mapped[str] = mapped_column(String(255))
    gpu_kinds: Mapped[list[Any]] = mapped_column()
    gpu_count: Mapped[int] = mapped_column(default=0)
    builds: Mapped[list[Any]] = mapped_column()
    registered_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Its last heartbeat or claim: the only clock of liveness (app.workers.liveness).
    last_heartbeat_at: Mapped[datetime] = mapped_column(default=utcnow)


class ApiToken(Base):
    """A bearer token: only the sha256 of its secret is stored, with the scopes it grants."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    hash: Mapped[str] = mapped_column(String(64), unique=True)
    scopes: Mapped[list[Any]] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column()
    revoked_at: Mapped[datetime | None] = mapped_column()
    # Set on a worker's own credential, issued at its registration: it acts for that worker only.
    worker_id: Mapped[int | None] = mapped_column(ForeignKey("workers.id", ondelete="CASCADE"), unique=True)
    # The token whose holder made this one (a worker's credential: the token that registered it); None
    # for the bootstrap DRAFTBENCH_TOKEN and `draftbench token create`. A token is valid only while
    # every token up its chain is (app.auth.service.verify). Deleting an issuer deletes what it issued.
    issued_by_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="CASCADE"))


class Sweep(Base):
    __tablename__ = "sweeps"
    # An Idempotency-Key belongs to the caller that sent it: another token's key is another sweep.
    __table_args__ = (
        UniqueConstraint("idempotency_scope", "idempotency_key"),
        Index("ix_sweeps_created_at", "created_at"),  # the newest sweeps, whose builds pages show unasked
        # An import finds the sweep of its folder by it; one folder is one sweep (app.sweeps.imports).
        Index("ix_sweeps_folder_id", "folder_id", unique=True),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    # A copy of spec["build"], so that lists of sweeps never load whole specs.
    build: Mapped[str] = mapped_column(String(128))
    spec: Mapped[dict[str, Any]] = mapped_column()
    priority: Mapped[int] = mapped_column(default=0)
    pull_request: Mapped[int | None] = mapped_column()
    branch: Mapped[str | None] = mapped_column(String(255))
    commit: Mapped[str | None] = mapped_column(String(64))
    tags: Mapped[list[Any]] = mapped_column(default=list)
    submitted_by: Mapped[str | None] = mapped_column(String(200))
    reason: Mapped[str | None] = mapped_column(Text)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    # Who sent the key ("token:7", "bootstrap", "import") and the sha256 of the body it came with.
    idempotency_scope: Mapped[str | None] = mapped_column(String(64))
    request_hash: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    cancelled_at: Mapped[datetime | None] = mapped_column()
    # The token that submitted it (None: the bootstrap DRAFTBENCH_TOKEN or an import); it may cancel it.
    created_by_token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="SET NULL"))
    # The random identity of the folder of cells it was imported from (``folder.json``, written by
    # ``draftbench expand``), which a folder keeps from before any of its cells ran: None for a sweep submitted here or
    # imported from a folder without one.
    folder_id: Mapped[str | None] = mapped_column(String(32))

    jobs: Mapped[list["Job"]] = relationship(back_populates="sweep", order_by="Job.id")


class Job(Base):
    """One run of a cell (one repeat): the unit the queue hands to a worker.

    ``backend`` and ``graph_mode`` are what the cell requests; what ran is on its Result
    (``resolved_backend``, ``resolved_graph_mode``).
    """

    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_claim", "state", "gpu_kind", "build", "priority", "id"),
        # The stalled-job check: running jobs by the worker that holds them.
        Index("ix_jobs_state_worker", "state", "worker_id"),
        # The claim's fairness terms: running jobs per sweep, and when the sweep was last served.
        Index("ix_jobs_sweep_state", "sweep_id", "state"),
        Index("ix_jobs_sweep_started", "sweep_id", "started_at"),
        # The dashboards: a build's cells, and one cell's history across builds.
        Index("ix_jobs_build", "build"),
        Index("ix_jobs_cell", "method", "backend", "graph_mode"),
        # A comparison's lookback: each build's newest succeeded job of some GPU kinds (migration 0017).
        Index("ix_jobs_build_finished", "state", "build", "finished_at", "gpu_kind"),
        # A paired job's partner, which the claim reads for every paired candidate (migration 0019).
        Index("ix_jobs_pair", "pair_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id", ondelete="CASCADE"), index=True)
    cell_index: Mapped[int] = mapped_column()
    repeat: Mapped[int] = mapped_column()
    build: Mapped[str] = mapped_column(String(128))
    gpu_kind: Mapped[str] = mapped_column(String(32))
    backend: Mapped[str] = mapped_column(String(32))
    graph_mode: Mapped[str] = mapped_column(String(32))
    # None for a baseline cell (no speculation).
    method: Mapped[str | None] = mapped_column(String(32))
    # "offline" (LLM.generate) or "serve" (vLLM's OpenAI server under ``concurrency`` clients).
    mode: Mapped[str] = mapped_column(String(16), default="offline", server_default="offline")
    concurrency: Mapped[int | None] = mapped_column()
    # vLLM's own environment variables the cell ran with (an axis of the sweep: VLLM_USE_V2_MODEL_RUNNER...).
    env: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # The cell spec it runs (app.schemas.cell.CellSpec, canonical); its column kept the name it had as "config".
    spec: Mapped[dict[str, Any]] = mapped_column("config")
    config_hash: Mapped[str] = mapped_column(String(64), index=True)
    state: Mapped[JobState] = mapped_column(_enum(JobState), default=JobState.QUEUED)
    priority: Mapped[int] = mapped_column(default=0)
    # GPUs the cell takes on one host: tensor_parallel_size x pipeline_parallel_size; 0 on the CPU engine.
    gpus_needed: Mapped[int] = mapped_column(default=1, server_default="1")
    attempts: Mapped[int] = mapped_column(default=0)
    max_attempts: Mapped[int] = mapped_column(default=3)
    # The worker holding a running job; it holds it while it is alive (app.workers.liveness).
    worker_id: Mapped[int | None] = mapped_column(ForeignKey("workers.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column()
    finished_at: Mapped[datetime | None] = mapped_column()
    error: Mapped[str | None] = mapped_column(Text)
    # Paired runs (app.sweeps.pairing): a base job and a head job of one cell and repeat share a pair id (32 hex
    # digits, unique across databases, so an export keeps it) and run back to back on one worker, ``pair_order``
    # 0 first; both None for a job that runs alone.
    pair_id: Mapped[str | None] = mapped_column(String(32))
    pair_order: Mapped[int | None] = mapped_column()

    sweep: Mapped[Sweep] = relationship(back_populates="jobs")
    result: Mapped["Result | None"] = relationship(back_populates="job", uselist=False)
    crash: Mapped["Crash | None"] = relationship(back_populates="job", uselist=False)


class Result(Base):
    """What a successful cell measured, with the derived metrics stored for filtering."""

    __tablename__ = "results"
    # Calibration misses over every result (pages and ``draftbench status``): few rows among many, listed newest first
    # (``app.newest.RESULTS``), which the index's end gives without sorting them.
    __table_args__ = (Index("ix_results_calibration_miss", "calibration_miss", "created_at", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), unique=True)
    engine_start_s: Mapped[float] = mapped_column(Float)
    generation_s: Mapped[float] = mapped_column(Float)
    # Counts are 64-bit: a day-long cell drafts more tokens than 32 bits hold (app.schemas.physical.MAX_COUNT).
    num_requests: Mapped[int] = mapped_column(BigInteger)
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    # The median over the cell's measured rounds, with its interval: a block bootstrap over the rounds' passes where
    # the cell kept them (app.analysis.passes; ``passes`` says how many), else the rounds' order-statistic interval
    # (app.analysis.rounds). ``tokens_per_s_level`` is its confidence; NULL on rows stored before migration 0020,
    # whose level is the rounds' (app.analysis.fallback.repeat_level).
    tokens_per_s: Mapped[float] = mapped_column(Float)
    tokens_per_s_low: Mapped[float | None] = mapped_column(Float)
    tokens_per_s_high: Mapped[float | None] = mapped_column(Float)
    tokens_per_s_level: Mapped[float | None] = mapped_column(Float)
    passes: Mapped[int | None] = mapped_column()
    requests_per_s: Mapped[float] = mapped_column(Float)
    rounds: Mapped[int] = mapped_column(default=1, server_default="1")
    # The spread between the rounds of this start, kept as it is stored (``app.noise.service.round_terms``): how many
    # rounds measured a speed and their ln tokens/s' squared deviations from their mean. ``/noise`` sums them over
    # every start; reading each start's rounds from ``raw`` instead took seconds at 100k results.
    round_speeds: Mapped[int | None] = mapped_column()
    round_squares: Mapped[float | None] = mapped_column(Float)
    # The GPUs' energy over the measured rounds (NVML's counters, summed over the cell's GPUs) and output tokens per
    # joule: the median over the rounds of their tokens / joules, with the rounds' order-statistic interval
    # (app.analysis.energy). All NULL where the GPU did not report it; ``energy_reason`` then says why (NULL on rows
    # stored before migration 0023, which never read it).
    energy_j: Mapped[float | None] = mapped_column(Float)
    tokens_per_joule: Mapped[float | None] = mapped_column(Float)
    tokens_per_joule_low: Mapped[float | None] = mapped_column(Float)
    tokens_per_joule_high: Mapped[float | None] = mapped_column(Float)
    energy_reason: Mapped[str | None] = mapped_column(String(300))
    # Seconds inside measured rounds, and that over the cell's whole wall time (engine start included).
    measured_s: Mapped[float | None] = mapped_column(Float)
    efficiency: Mapped[float | None] = mapped_column(Float)
    # "V1" or "V2": which of vLLM's model runners ran the cell.
    model_runner: Mapped[str | None] = mapped_column(String(16))
    # Serving mode: latency percentiles and rates (app.schemas.cell.Serving); None offline.
    serving: Mapped[dict[str, Any] | None] = mapped_column()
    # The serving runner before cell schema 5 counted a stream whose tokens decoded to no text as failed and left its
    # tokens out of tokens/s: such a start measured another quantity, so it is a cell of its own
    # (``app.cells.identity.counted``). False offline, and for files of vLLM's own bench tools.
    empty_as_failed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Calibration cells (synthetic acceptance): the per-position rates asked for, and whether a
    # measured rate's interval misses its expected rate.
    expected_per_position: Mapped[list[Any] | None] = mapped_column()
    calibration_miss: Mapped[bool | None] = mapped_column(Boolean)
    # What measured it (``ResultSource``).
    source: Mapped[str] = mapped_column(String(32), default=ResultSource.CELL.value, server_default=ResultSource.CELL.value)
    num_drafts: Mapped[int] = mapped_column(BigInteger, default=0)
    num_draft_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    num_accepted_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    accepted_per_position: Mapped[list[Any]] = mapped_column(default=list)
    # The requests' counters by prompt category and their histogram of acceptance rates
    # (``app.analysis.request_acceptance.RequestAcceptance``); None where the cell reported no per-request counters.
    request_acceptance: Mapped[dict[str, Any] | None] = mapped_column()
    acceptance_rate: Mapped[float | None] = mapped_column(Float)
    acceptance_rate_low: Mapped[float | None] = mapped_column(Float)
    acceptance_rate_high: Mapped[float | None] = mapped_column(Float)
    mean_acceptance_length: Mapped[float | None] = mapped_column(Float)
    mean_acceptance_length_low: Mapped[float | None] = mapped_column(Float)
    mean_acceptance_length_high: Mapped[float | None] = mapped_column(Float)
    output_fingerprint: Mapped[str] = mapped_column(String(128))
    resolved_backend: Mapped[str | None] = mapped_column(String(64))
    resolved_draft_backend: Mapped[str | None] = mapped_column(String(64))
    resolved_graph_mode: Mapped[str | None] = mapped_column(String(32))
    resolved_draft_graph_mode: Mapped[str | None] = mapped_column(String(32))
    graph_downgraded: Mapped[bool] = mapped_column(Boolean, default=False)
    draft_eager: Mapped[bool] = mapped_column(Boolean, default=False)
    # vLLM's log said it turned asynchronous scheduling off (app.vllmlog.ran); NULL on rows stored before migration
    # 0025 that `draftbench rederive` has not read again.
    async_scheduling_off: Mapped[bool | None] = mapped_column(Boolean)
    vllm_version: Mapped[str | None] = mapped_column(String(64))
    gpu_name: Mapped[str | None] = mapped_column(String(128))
    versions: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # The cell's JSON as validated, and what the log said ran, kept whole for later questions.
    raw: Mapped[dict[str, Any]] = mapped_column()
    ran: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    job: Mapped[Job] = relationship(back_populates="result")


class CrashSignature(Base):
    """A group of crashes that share a normalised cause."""

    __tablename__ = "crash_signatures"

    id: Mapped[int] = mapped_column(primary_key=True)
    signature: Mapped[str] = mapped_column(String(64), unique=True)
    # What a vLLM developer recognises at a glance (app.crashes.titles).
    title: Mapped[str] = mapped_column(String(300), default="", server_default="")
    kind: Mapped[CrashKind] = mapped_column(_enum(CrashKind))
    exception_type: Mapped[str | None] = mapped_column(String(255))
    message: Mapped[str] = mapped_column(Text)
    frames: Mapped[list[Any]] = mapped_column(default=list)
    first_seen: Mapped[datetime] = mapped_column(default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(default=utcnow)
    count: Mapped[int] = mapped_column(default=0)

    crashes: Mapped[list["Crash"]] = relationship(back_populates="signature_group")


class Crash(Base):
    __tablename__ = "crashes"

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), unique=True)
    signature_id: Mapped[int] = mapped_column(ForeignKey("crash_signatures.id"), index=True)
    kind: Mapped[CrashKind] = mapped_column(_enum(CrashKind))
    exit_code: Mapped[int | None] = mapped_column()
    signal: Mapped[int | None] = mapped_column()
    message: Mapped[str] = mapped_column(Text)
    # The lines of the log a reader needs first, kept when the crash is signed: a page never
    # decompresses a log (up to DRAFTBENCH_MAX_LOG_BYTES) to show them.
    excerpt: Mapped[str | None] = mapped_column(Text)
    duration_s: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    job: Mapped[Job] = relationship(back_populates="crash")
    signature_group: Mapped[CrashSignature] = relationship(back_populates="crashes")


class JobLog(Base):
    """The cell's full log, zlib-compressed: crashes are diagnosed from it long after the run."""

    __tablename__ = "job_logs"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    compressed: Mapped[bytes] = mapped_column(LargeBinary)
    size: Mapped[int] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class CrashOverride(Base):
    """A merge or split of crash groups made by hand, with why and by whom; ``rederive`` keeps it.

    A merge sends to group ``into`` every crash whose group is ``signature`` and the crashes of
    ``job_ids`` (both groups' when it was made); a split sends the crashes of ``job_ids`` to a new
    group ``into``. Applied in the order they were made, after signing (``app.crashes.overrides``).
    """

    __tablename__ = "crash_overrides"

    id: Mapped[int] = mapped_column(primary_key=True)
    action: Mapped[str] = mapped_column(String(16))  # "merge" or "split"
    signature: Mapped[str] = mapped_column(String(64), index=True)
    into: Mapped[str] = mapped_column(String(64))
    job_ids: Mapped[list[Any]] = mapped_column(default=list)
    reason: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class AlertAck(Base):
    """An open regression (``app.alerts``) acknowledged by hand, with why and by whom.

    Alerts are computed from the results (``AlertSnapshot`` keeps the last answer); ``alert_id`` names one (its
    metric, cell and first bad build), so an acknowledgement holds until the regression is fixed or moves to another build.
    """

    __tablename__ = "alert_acks"

    id: Mapped[int] = mapped_column(primary_key=True)
    alert_id: Mapped[str] = mapped_column(String(32), unique=True)
    reason: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class AlertSnapshot(Base):
    """The open regressions ``app.alerts.service.find`` last found, so that a process's first page shows them without
    reading every cell's history (seconds at 100k results): each alert as JSON (``service.Alert`` but its
    acknowledgement, read beside it), under the key it was found for (the finished jobs' count and newest finish).
    Derived; the service's schedule rewrites it when the key has moved, one row (two while writers overlap: the
    newest counts)."""

    __tablename__ = "alert_snapshots"

    id: Mapped[int] = mapped_column(primary_key=True)
    finished_jobs: Mapped[int] = mapped_column(BigInteger)
    newest_finish: Mapped[datetime | None] = mapped_column()
    alerts: Mapped[list[Any]] = mapped_column()
    computed_at: Mapped[datetime] = mapped_column(default=utcnow)


class AlarmCheck(Base):
    """A graphed cell with drafts as the graph-capture alarm last judged it (``app.alarms.service``): derived from
    the results, and rewritten with every row of its build and GPU kind whenever one of their jobs stores a result
    (or an import, a migration or ``draftbench rederive`` ran), so pages read every build's without reading results."""

    __tablename__ = "alarm_checks"
    __table_args__ = (Index("ix_alarm_checks_build", "build", "gpu_kind"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    build: Mapped[str] = mapped_column(String(128))
    gpu_kind: Mapped[str] = mapped_column(String(32))
    backend: Mapped[str] = mapped_column(String(32))
    graph_mode: Mapped[str] = mapped_column(String(32))
    method: Mapped[str] = mapped_column(String(32))
    # The cell's measured variant (app.cells.identity) and its label as pages show it.
    variant: Mapped[str] = mapped_column(String(32))
    label: Mapped[str] = mapped_column(Text)
    outcome: Mapped[CheckOutcome] = mapped_column(_enum(CheckOutcome))
    # The sweeps whose results the check read, the cell's and its eager sibling's, and their names.
    sweep_ids: Mapped[list[Any]] = mapped_column()
    sweep_names: Mapped[list[Any]] = mapped_column()
    # What the cell's results say ran, and when the newest finished: the facts a page of checks shows.
    vllm_versions: Mapped[list[Any]] = mapped_column()
    gpu_names: Mapped[list[Any]] = mapped_column()
    ran_at: Mapped[datetime | None] = mapped_column()
    # What decided the check (app.alarms.service.Check.reason): the difference of the measure nearest to raising the
    # alarm, with Newcombe's 95 % interval, and the minimum effect it was held to. Null for an unpaired cell, and for
    # one judged before migration 0028 but for an alarm (its reason unknown until its build is judged again).
    kind: Mapped[AlarmKind | None] = mapped_column(_enum(AlarmKind))
    difference: Mapped[float | None] = mapped_column(Float)
    difference_low: Mapped[float | None] = mapped_column(Float)
    difference_high: Mapped[float | None] = mapped_column(Float)
    min_effect: Mapped[float | None] = mapped_column(Float)
    computed_at: Mapped[datetime] = mapped_column(default=utcnow)


class StoredAlarm(Base):
    """An alarm the check found (``AlarmCheck`` with outcome ``alarm`` has one or two): the cell and its eager
    sibling, each with the successes and trials of its proportion (accepted of draft tokens, or outputs equal to
    the baseline's), the difference with its interval, and the jobs and sweeps each side pooled. Derived and
    rewritten as ``AlarmCheck`` is."""

    __tablename__ = "alarms"
    __table_args__ = (Index("ix_alarms_build", "build", "gpu_kind"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[AlarmKind] = mapped_column(_enum(AlarmKind))
    build: Mapped[str] = mapped_column(String(128))
    gpu_kind: Mapped[str] = mapped_column(String(32))
    method: Mapped[str] = mapped_column(String(32))
    variant: Mapped[str] = mapped_column(String(32))
    label: Mapped[str] = mapped_column(Text)
    backend: Mapped[str] = mapped_column(String(32))
    graph_mode: Mapped[str] = mapped_column(String(32))
    resolved_graph_modes: Mapped[list[Any]] = mapped_column()
    successes: Mapped[int] = mapped_column(BigInteger)
    trials: Mapped[int] = mapped_column(BigInteger)
    draft_tokens: Mapped[int] = mapped_column(BigInteger)
    job_ids: Mapped[list[Any]] = mapped_column()
    sweep_ids: Mapped[list[Any]] = mapped_column()
    eager_backend: Mapped[str] = mapped_column(String(32))
    eager_resolved_graph_modes: Mapped[list[Any]] = mapped_column()
    eager_successes: Mapped[int] = mapped_column(BigInteger)
    eager_trials: Mapped[int] = mapped_column(BigInteger)
    eager_draft_tokens: Mapped[int] = mapped_column(BigInteger)
    eager_job_ids: Mapped[list[Any]] = mapped_column()
    eager_sweep_ids: Mapped[list[Any]] = mapped_column()
    # The cell's proportion minus its sibling's, with Newcombe's 95 % interval (app.analysis.alarms.difference).
    difference: Mapped[float] = mapped_column(Float)
    difference_low: Mapped[float] = mapped_column(Float)
    difference_high: Mapped[float] = mapped_column(Float)
    computed_at: Mapped[datetime] = mapped_column(default=utcnow)


class Bisection(Base):
    """``draftbench bisect``: an ordered series of builds, its good and bad members, and the sweep its steps run
    (``name``). Where it stands is derived from its steps (``app.bisections.service``)."""

    __tablename__ = "bisections"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    series: Mapped[list[Any]] = mapped_column()
    good: Mapped[str] = mapped_column(String(128))
    bad: Mapped[str] = mapped_column(String(128))
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    steps: Mapped[list["BisectionStep"]] = relationship(order_by="BisectionStep.id", cascade="all, delete-orphan")


class BisectionStep(Base):
    """One build of a bisection run and compared with the good build: the first step is the bad build itself. The
    evidence is the comparison's rows as they stood when the step was called (a later result cannot move it)."""

    __tablename__ = "bisection_steps"

    id: Mapped[int] = mapped_column(primary_key=True)
    bisection_id: Mapped[int] = mapped_column(ForeignKey("bisections.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column()
    build: Mapped[str] = mapped_column(String(128))
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"))
    against_sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"))
    call: Mapped[StepCall] = mapped_column(_enum(StepCall))
    evidence: Mapped[list[Any]] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
