"""The graph-capture alarm at the API's edge (``/api/v1/alarms``, ``/api/v1/compare``)."""

from pydantic import BaseModel, Field

from app.enums import AlarmKind


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
    sibling (``alarmed`` + ``within`` + ``cannot_show``); ``cannot_show``: acceptance exactly 0 or 1 (a draft that
    never matches, the target as its own draft), which no capture bug can move out of its interval; ``unpaired``:
    no eager (NONE) sibling ran."""

    scope: str
    alarmed: int
    within: int
    cannot_show: int
    unpaired: int
    judged: int
