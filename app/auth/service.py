"""Creating, checking, listing and revoking API tokens. Only a secret's sha256 is ever stored."""

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Select, String, and_, bindparam, func, literal_column, or_, select
from sqlalchemy.orm import Session, aliased

from app.enums import TokenScope
from app.errors import NotFoundError
from app.models import ApiToken, Sweep, utcnow

PREFIX = "dbk_"
# last_used_at is written at most this often per token, so reads of it stay cheap on every request.
TOUCH_EVERY = timedelta(seconds=60)
# The most tokens a chain may hold, the token itself and its issuers up to a root (one with no issuer:
# made by the bootstrap token or `draftbench token create`). Authentication reads a chain in one
# query that stops here; a token at this depth issues nothing (app.api.deps).
MAX_CHAIN = 8


@dataclass(frozen=True)
class Principal:
    """Who made a request: a database token, or the bootstrap DRAFTBENCH_TOKEN (``token_id`` None).

    ``worker_id`` is set for a worker's own credential (issued when it registered): such a token
    acts for that worker and nothing else. ``depth`` counts the tokens from this one up to its
    root, both included (0 for the bootstrap token, which no database row stands for).
    """

    token_id: int | None
    name: str
    scopes: frozenset[TokenScope]
    worker_id: int | None = None
    depth: int = 0

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
    *,
    session: Session,
    name: str,
    scopes: Iterable[TokenScope],
    issued_by: int | None,
    worker_id: int | None = None,
) -> tuple[ApiToken, str]:
    """A new token and its secret. The secret is returned here once and never stored.

    ``issued_by`` is the database token of whoever asked for it (None for the bootstrap token and
    the CLI): revoking that token, or any token above it, ends this one too. With ``worker_id`` it
    is that worker's credential (app.workers.service.register).
    """
    wanted = sorted({TokenScope(scope).value for scope in scopes})
    if not wanted:
        raise ValueError("a token needs at least one scope")
    secret = PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(name=name, hash=hash_secret(secret), scopes=wanted, worker_id=worker_id, issued_by_id=issued_by)
    session.add(token)
    session.flush()
    return token, secret


def _chain_statement() -> Select:
    """The token with hash ``:digest``, how many tokens of its chain refuse it, and the chain's depth.

    One statement, whatever the depth: a recursive CTE walks ``issued_by_id`` up from the token
    (primary-key lookups, at most ``MAX_CHAIN`` rows). A row refuses the token if it is revoked, or
    if it is the ``MAX_CHAIN``-th and still has an issuer (the walk stopped short of the root, so
    what lies above it was never checked). Built once: building it costs more than running it.
    """
    digest = bindparam("digest", type_=String)
    chain = (
        select(ApiToken.id, ApiToken.issued_by_id, ApiToken.revoked_at, literal_column("1").label("depth"))
        .where(ApiToken.hash == digest)
        .cte("chain", recursive=True)
    )
    issuer = aliased(ApiToken)
    chain = chain.union_all(
        select(issuer.id, issuer.issued_by_id, issuer.revoked_at, chain.c.depth + literal_column("1")).where(
            issuer.id == chain.c.issued_by_id, chain.c.depth < MAX_CHAIN
        )
    )
    refusing = or_(chain.c.revoked_at.is_not(None), and_(chain.c.depth == MAX_CHAIN, chain.c.issued_by_id.is_not(None)))
    return select(
        ApiToken,
        select(func.count()).select_from(chain).where(refusing).scalar_subquery(),
        select(func.max(chain.c.depth)).scalar_subquery(),
    ).where(ApiToken.hash == digest)


_CHAIN = _chain_statement()


def verify(*, session: Session, secret: str) -> tuple[ApiToken, int] | None:
    """The token with this secret and its chain's depth, if it and every token that issued it (up to
    the root) are live; else None. One query (``_chain_statement``). A live token's ``last_used_at``
    is refreshed.
    """
    row = session.execute(_CHAIN, {"digest": hash_secret(secret)}).one_or_none()
    if row is None or row[1]:
        return None
    token, depth = row[0], row[2]
    now = utcnow()
    if token.last_used_at is None or now - token.last_used_at > TOUCH_EVERY:
        token.last_used_at = now
    return token, depth


def authenticate(*, session: Session, secret: str, bootstrap: str) -> Principal | None:
    """Who holds ``secret``: the bootstrap token (constant-time compare), a live database token, or nobody."""
    if bootstrap and hmac.compare_digest(secret.encode(), bootstrap.encode()):
        return BOOTSTRAP
    found = verify(session=session, secret=secret) if secret.startswith(PREFIX) else None
    if found is None:
        return None
    token, depth = found
    return Principal(
        token_id=token.id,
        name=token.name,
        scopes=frozenset(TokenScope(s) for s in token.scopes),
        worker_id=token.worker_id,
        depth=depth,
    )


def revoke(*, session: Session, token_id: int) -> ApiToken:
    """Mark the token revoked (kept for the record); revoking twice keeps the first time.

    Every token issued under it, however far down, gets 401 from now on too (``verify``).
    """
    token = session.get(ApiToken, token_id)
    if token is None:
        raise NotFoundError("token", token_id)
    token.revoked_at = token.revoked_at or utcnow()
    return token


def list_all(*, session: Session) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id)))

