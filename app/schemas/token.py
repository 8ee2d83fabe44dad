"""API tokens as the API shows them: the secret only once, in the answer to its creation."""

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from app.enums import TokenScope
from app.models import ApiToken
from app.schemas.base import Input
from app.schemas.sweep import axis
from app.schemas.text import stored


class TokenCreate(Input):
    name: stored(ApiToken.name, min_length=1) = Field(description="Who or what holds it: 'ci', 'h200-host-3'")
    scopes: axis(TokenScope) = Field(min_length=1, max_length=len(TokenScope), description="admin implies every scope")


class TokenOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    scopes: list[TokenScope]
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    # Set on a worker's own credential (issued when the worker registered).
    worker_id: int | None = None
    # The token that issued it (revoking that one ends this one); None for the bootstrap token's and the CLI's.
    issued_by_id: int | None = None


class TokenCreated(TokenOut):
    secret: str = Field(description="Shown once: only its sha256 is stored")
