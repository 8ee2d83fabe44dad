"""``GET /api/v1/compare``: two sweeps' common cells with their verdicts, as the CI comment reads them."""

from pydantic import BaseModel

from app.analysis.verdicts import Change, Rule
from app.enums import AlarmKind, Verdict
from app.schemas.alarm import CheckCounts
from app.schemas.alert import AlertOut


class Interval(BaseModel):
    """A value with its 95 % interval (bounds None when a side has no spread to go on)."""

    value: float
    low: float | None
    high: float | None


class CellSide(BaseModel):
    """One side of a compared cell: what ran, how fast, how much it accepted, and how it died."""

    sweep_ids: list[int]
    build: str
    ran: int
    died: int
    repeats: int
    tokens_per_s: Interval | None
    acceptance: Interval | None
    resolved_graph_modes: list[str]
    downgraded: bool
    draft_eager: bool
    crash_kinds: dict[str, int]
    crash_signature: str | None
    crash_title: str | None
    vllm_versions: list[str]
    gpu_names: list[str]
    # Stored figures left out because no run can have made them (tokens/s past the physical ceiling...).
    notes: list[str] = []
    # The side's jobs of the cell, whatever became of them: where its figures came from (a sweep's jobs name their
    # cell index). Absent from older services.
    job_ids: list[int] = []
    # Output tokens per joule pooled over the repeats whose GPUs reported energy (``energy_repeats`` of them), with
    # its 95 % interval; None where none did, and ``energy_reasons`` says why. Absent from older services.
    tokens_per_joule: Interval | None = None
    energy_repeats: int = 0
    energy_reasons: list[str] = []


class SpeedCall(BaseModel):
    """How a cell's tokens/s was called (``app.analysis.verdicts.speed_change``): by which rule, the ratio head / base
    with the interval the call read (``confidence``: its level; None bounds with one start a side and no model), and
    the smallest relative change these starts would have found four times in five (``detectable``, None without a
    noise model)."""

    change: Change
    rule: Rule
    ratio: float
    low: float | None
    high: float | None
    confidence: float | None
    detectable: float | None
    base_starts: int
    head_starts: int
    pairs: int
    sentence: str


class CellChange(BaseModel):
    """A cell both sweeps ran, worst verdict first: head / base tokens/s, head - base acceptance, and why."""

    verdict: Verdict
    gpu_kind: str
    method: str | None
    label: str
    backend: str
    graph_mode: str
    speed_ratio: Interval | None
    acceptance_difference: Interval | None
    tokens_per_s_change: Change | None  # the statistics' call on tokens/s alone (None: a side did not run)
    tokens_per_s_call: SpeedCall | None = None  # how that call was made and what it could have seen
    acceptance_change: Change | None  # on acceptance and its positions (None: a side did not draft)
    # Head / base tokens per joule with its 95 % interval, where both sides' GPUs reported energy (no verdict reads it).
    tokens_per_joule_ratio: Interval | None = None
    reasons: list[str]
    base: CellSide
    head: CellSide


class CaptureAlarm(BaseModel):
    """A cell whose acceptance (or lossless share) moved against its eager sibling (``/alarms``), either of them run
    in the sweep, judged within its whole build and GPU kind."""

    kind: AlarmKind
    backend: str
    graph_mode: str
    label: str
    difference: Interval
    sentence: str


class FieldDifference(BaseModel):
    """A field of the measured identity (``workload.max_tokens``) the two sweeps' cells hold differently."""

    field: str
    base: list[str]
    head: list[str]
    every_cell: bool  # no value is held on both sides: this field alone parts every base cell from every head cell


class Apart(BaseModel):
    """Why two sweeps share no cell: the fields that differ, and in words."""

    sentence: str
    fields: list[FieldDifference]


class Comparison(BaseModel):
    base_sweep: int
    head_sweep: int
    base_build: str
    head_build: str
    counts: dict[Verdict, int]
    changes: list[CellChange]
    alarms: list[CaptureAlarm]  # the head sweep's
    base_only: int
    head_only: int
    # Set when both sweeps have cells and share none (``app.cells.identity.apart``); absent from older services.
    apart: Apart | None = None
    # What the alarm made of the head sweep's graphed cells (those it did not flag: within, cannot show, unpaired).
    alarm_checks: CheckCounts | None = None
    base_alarms: list[CaptureAlarm] = []
    # Open regressions (``/api/v1/alerts``) whose cell on the newest build ran in the head sweep.
    alerts: list[AlertOut] = []
