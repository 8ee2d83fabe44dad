"""Creating, checking, listing and revoking API tokens. Only a secret's sha256 is ever stored."""

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.enums import TokenScope
from app.errors import NotFoundError
from app.models import ApiToken, Sweep, Worker, utcnow

PREFIX = "dbk_"
# last_used_at is written at most this often per token, so reads of it stay cheap on every request.
TOUCH_EVERY = timedelta(seconds=60)


@dataclass(frozen=True)
class Principal:
    """Who made a request: a database token, or the bootstrap DRAFTBENCH_TOKEN (``token_id`` None).

    ``worker_id`` is set for a worker's own credential (issued when it registered): such a token
    acts for that worker and nothing else.
    """

    token_id: int | None
    name: str
    scopes: frozenset[TokenScope]
    worker_id: int | None = None

    @property
    def key(self) -> str:
        """What the rate limit counts by."""
        return "bootstrap" if self.token_id is None else f"token:{self.token_id}"

    def has(self, scope: TokenScope) -> bool:
        """Admin implies every scope."""
        return scope in self.scopes or TokenScope.ADMIN in self.scopes

    def may_cancel(self, sweep: Sweep) -> bool:
        """An admin cancels any sweep; a submitter only those its own token submitted."""
        if self.has(TokenScope.ADMIN):
            return True
        return self.has(TokenScope.SUBMIT) and self.token_id is not None and sweep.created_by_token_id == self.token_id


BOOTSTRAP = Principal(token_id=None, name="DRAFTBENCH_TOKEN", scopes=frozenset(TokenScope))


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create(
    *, session: Session, name: str, scopes: Iterable[TokenScope], worker_id: int | None = None
) -> tuple[ApiToken, str]:
    """A new token and its secret. The secret is returned here once and never stored.

    With ``worker_id`` it is that worker's credential (app.workers.service.register).
    """
    wanted = sorted({TokenScope(scope).value for scope in scopes})
    if not wanted:
        raise ValueError("a token needs at least one scope")
    secret = PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(name=name, hash=hash_secret(secret), scopes=wanted, worker_id=worker_id)
    session.add(token)
    session.flush()
    return token, secret


def verify(*, session: Session, secret: str) -> ApiToken | None:
    """The live (not revoked) token with this secret, its ``last_used_at`` refreshed; else None.

    A worker's credential also dies with the token that registered the worker (revoking a host's
    token ends every worker it started).
    """
    token = session.scalar(select(ApiToken).where(ApiToken.hash == hash_secret(secret)))
    if token is None or token.revoked_at is not None:
        return None
    if token.worker_id is not None and not _registrar_live(session=session, worker_id=token.worker_id):
        return None
    now = utcnow()
    if token.last_used_at is None or now - token.last_used_at > TOUCH_EVERY:
        token.last_used_at = now
    return token


def authenticate(*, session: Session, secret: str, bootstrap: str) -> Principal | None:
    """Who holds ``secret``: the bootstrap token (constant-time compare), a live database token, or nobody."""
    if bootstrap and hmac.compare_digest(secret.encode(), bootstrap.encode()):
        return BOOTSTRAP
    token = verify(session=session, secret=secret) if secret.startswith(PREFIX) else None
    if token is None:
        return None
    return Principal(
        token_id=token.id,
        name=token.name,
        scopes=frozenset(TokenScope(s) for s in token.scopes),
        worker_id=token.worker_id,
    )


def revoke(*, session: Session, token_id: int) -> ApiToken:
    """Mark the token revoked (kept for the record); revoking twice keeps the first time."""
    token = session.get(ApiToken, token_id)
    if token is None:
        raise NotFoundError("token", token_id)
    token.revoked_at = token.revoked_at or utcnow()
    return token


def list_all(*, session: Session) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id)))


def _registrar_live(*, session: Session, worker_id: int) -> bool:
    """Whether the token that registered the worker is still valid (the bootstrap token always is)."""
    registrar = session.scalar(select(Worker.token_id).where(Worker.id == worker_id))
    if registrar is None:
        return True
    return session.scalar(select(ApiToken.revoked_at).where(ApiToken.id == registrar)) is None
