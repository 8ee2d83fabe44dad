"""The graph-capture alarm at the API's edge (``/api/v1/alarms``, ``/api/v1/compare``)."""

from pydantic import BaseModel, Field

from app.enums import AlarmKind, CheckOutcome, CheckReason


class AlarmOut(BaseModel):
    """A graphed cell whose acceptance (or lossless share) moved against its eager sibling beyond the interval of
    the difference and the minimum effect. Proportions are ``successes / trials`` over the repeats' summed counts
    (accepted of draft tokens, or outputs equal to the baseline's), each with its 95 % Wilson interval."""

    kind: AlarmKind
    build: str
    gpu_kind: str
    method: str | None
    label: str
    backend: str
    graph_mode: str
    resolved_graph_modes: list[str]
    value: float
    value_low: float
    value_high: float
    successes: int
    trials: int
    eager_value: float
    eager_value_low: float
    eager_value_high: float
    eager_successes: int
    eager_trials: int
    eager_backend: str
    difference: float
    difference_low: float
    difference_high: float
    draft_tokens: int
    eager_draft_tokens: int
    job_ids: list[int]
    eager_job_ids: list[int]
    sweep_ids: list[int] = Field(description="The sweeps whose results either side pooled")
    sentence: str


class CheckCounts(BaseModel):
    """What the alarm made of the graphed cells with drafts in scope: ``judged`` were compared with an eager
    sibling (``alarmed`` + ``within`` + ``cannot_show``); ``within``: not flagged, and able to show a bug
    (``within_by_reason`` says why); ``cannot_show``: acceptance exactly 0 or 1 (a draft that never matches, the
    target as its own draft), which no capture bug can move out of its interval; ``unpaired``: no eager (NONE)
    sibling ran."""

    scope: str
    alarmed: int
    within: int
    within_by_reason: dict[CheckReason, int] = Field(
        description="The within cells by what spared them (every reason but raised, summing to within): within_interval, "
                    "the difference's 95 % interval includes 0; below_min_effect, it excludes 0 but the difference is "
                    "smaller than the minimum effect; unknown, judged before migration 0028 kept the difference")
    cannot_show: int
    unpaired: int
    judged: int


class CheckOut(BaseModel):
    """A graphed cell with drafts and what the alarm made of it (``outcome``), with what decided that where it was
    judged against an eager sibling: the difference of the measure nearest to raising the alarm (``kind``), its
    Newcombe 95 % interval and the minimum effect it was held to (``reason``: ``app.analysis.alarms.decide``). Null
    for an unpaired cell, and but ``reason`` (``unknown``) for one stored before migration 0028 and not judged since."""

    build: str
    gpu_kind: str
    method: str
    label: str
    backend: str
    graph_mode: str
    outcome: CheckOutcome
    reason: CheckReason | None
    kind: AlarmKind | None
    difference: float | None
    difference_low: float | None
    difference_high: float | None
    min_effect: float | None
    sweep_ids: list[int] = Field(description="The sweeps whose results the cell or its eager sibling pooled")
    sentence: str
