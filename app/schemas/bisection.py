"""Bisections at the API's edge: what ``draftbench bisect`` sends, and a bisection with its steps as JSON."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from app.analysis.verdicts import Change
from app.enums import BisectionState, StepCall, Verdict
from app.models import Bisection
from app.schemas.base import Input
from app.schemas.compare import Interval
from app.schemas.ids import Id
from app.schemas.text import stored

# A series is read by hand on the history page: a few hundred builds is already 8 steps.
MAX_SERIES = 1000

BuildLabel = stored(Bisection.good, min_length=1, pattern=r"^[A-Za-z0-9._+-]+$")


class BisectionIn(Input):
    name: stored(Bisection.name, min_length=1) = Field(description="What is bisected (the sweep file's name)")
    series: list[BuildLabel] = Field(min_length=2, max_length=MAX_SERIES,
                                     description="Registered builds, oldest first, each once")
    good: BuildLabel = Field(description="A member of the series that does not show the change")
    bad: BuildLabel = Field(description="A later member that shows it")


class StepIn(Input):
    sweep_id: Id = Field(description="A finished sweep of the build the bisection runs next")
    against_sweep_id: Id = Field(description="A finished sweep of the good build, of the same cells")


class Evidence(BaseModel):
    """One cell of a step's comparison with the good build or the bad one: its verdict, each metric's call and the
    intervals, and the engine starts each side."""

    cell: str
    against: Literal["good", "bad"] = Field(description="The build compared with: the good one, or (after the first step) the bad one")
    verdict: Verdict
    tokens_per_s_change: Change | None
    acceptance_change: Change | None
    speed_ratio: Interval | None = Field(description="The step's tokens/s over the compared build's, 95 % interval")
    acceptance_difference: Interval | None = Field(description="The step's acceptance minus the compared build's, 95 % interval")
    compared_starts: int
    starts: int
    reasons: list[str]


class StepOut(BaseModel):
    position: int
    build: str
    sweep_id: int
    against_sweep_id: int
    call: StepCall
    evidence: list[Evidence]
    created_at: datetime


class BisectionOut(BaseModel):
    """A bisection and where it stands: the last good and first bad build known (``FOUND``: adjacent in the series),
    the build to run next while ``running``, and the steps so far, the bad build against the good one first."""

    id: int
    name: str
    series: list[str]
    good: str
    bad: str
    state: BisectionState
    last_good: str
    first_bad: str
    next_build: str | None
    steps_left: int = Field(description="Steps still to run at most, ceil(log2) of the builds left between the ends")
    symptoms: list[str] = Field(description="What the bad build changed against the good one, that each step looks for")
    bad_sweep_id: int | None = Field(description="The sweep each later step's rows against the bad build were compared "
                                                 "with: the first step's; null before it")
    steps: list[StepOut]
    created_by: str
    created_at: datetime
