"""Alerts at the API's edge: an open regression as JSON, and an acknowledgement's body."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from app.models import AlertAck
from app.schemas.base import Input
from app.schemas.text import stored


class AckIn(Input):
    reason: stored(AlertAck.reason, 2000, min_length=1) = Field(description="Why the drop is known or accepted")


class AlertOut(BaseModel):
    """A cell whose tokens/s or acceptance dropped at ``first_bad_build`` and has not come back since."""

    id: str
    metric: Literal["tokens_per_s", "acceptance"]
    gpu_kind: str
    method: str | None
    label: str
    backend: str
    graph_mode: str
    first_bad_build: str
    last_good_build: str
    latest_build: str
    before: float
    after: float
    change: float = Field(description="after / before - 1")
    builds: int = Field(description="Builds in the cell's history")
    acknowledged: bool
    ack_reason: str | None
    acked_by: str | None
    acked_at: datetime | None
