"""What the crash routes read and answer: groups with their title, and the merges and splits admins make."""

from datetime import datetime

from pydantic import BaseModel, Field

from app.enums import CrashKind
from app.schemas.base import Input
from app.schemas.ids import Id


class CrashGroupOut(BaseModel):
    signature: str
    title: str
    kind: CrashKind
    exception_type: str | None
    message: str
    frames: list[str]
    first_seen: datetime
    last_seen: datetime
    count: int


class CrashCell(BaseModel):
    job_id: int
    sweep_id: int
    gpu_kind: str
    backend: str
    graph_mode: str
    method: str | None
    build: str
    log: str | None = Field(description="URL of the job's log; null where the log was not kept")


class CrashGroupDetail(CrashGroupOut):
    job_ids: list[int]
    builds: list[str]
    cells: list[CrashCell]


class MergeIn(Input):
    """Merge the path's group into another: its crashes, and later ones signed alike, join ``into``."""

    into: str = Field(min_length=64, max_length=64, description="The signature of the group to merge into")
    reason: str = Field(min_length=1, max_length=2000, description="Why the two groups are one cause")


class SplitIn(Input):
    """Split some crashes out of the path's group into a group of their own."""

    job_ids: list[Id] = Field(
        min_length=1, max_length=10_000, description="Jobs whose crashes leave the group"
    )
    reason: str = Field(min_length=1, max_length=2000, description="Why these crashes are another cause")
