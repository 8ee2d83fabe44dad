"""FastAPI dependencies: the request's database session, settings, and who may write (tokens and scopes)."""

from collections.abc import Callable, Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.auth import service as tokens
from app.auth.ratelimit import retry_after
from app.auth.service import Principal
from app.config import Settings
from app.db import session_scope
from app.enums import TokenScope


def get_session(request: Request) -> Iterator[Session]:
    """One transaction per request: committed when the handler returns, rolled back on an error.

    Used with ``scope="function"`` (SessionDep): the commit happens before the response is sent.
    FastAPI's default for a dependency with yield ("request") runs it after the response has gone
    out, so a worker could read its claim and report on the job before the claim was committed
    (409), and a client could get 201 for a write whose commit then failed.
    """
    with session_scope(request.app.state.sessionmaker) as session:
        yield session


# Every route and dependency must use this one: the scope is part of FastAPI's dependency cache key.
_session = Depends(get_session, scope="function")


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


_bearer = HTTPBearer(
    auto_error=False, description="An API token (`draftbench token create`) or the bootstrap DRAFTBENCH_TOKEN"
)


def authenticate(
    request: Request,
    session: Annotated[Session, _session],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Who is calling: 401 for a missing, unknown or revoked token."""
    principal = None
    if credentials is not None:
        principal = tokens.authenticate(
            session=session, secret=credentials.credentials, bootstrap=request.app.state.settings.token
        )
    if principal is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "a valid bearer token is needed for writes" if credentials is None else "unknown or revoked token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return principal


def require_scope(scope: TokenScope) -> Callable[..., Principal]:
    """A dependency: the caller must hold ``scope`` (403 naming it), within its rate limit (429)."""

    def dependency(request: Request, principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        if not principal.has(scope):
            held = ", ".join(sorted(principal.scopes)) or "none"
            raise HTTPException(
                status.HTTP_403_FORBIDDEN, f"this needs a token with the '{scope}' scope (this token has: {held})"
            )
        wait = request.app.state.rate_limiter.take(principal.key)
        if wait:
            raise HTTPException(
                status.HTTP_429_TOO_MANY_REQUESTS,
                f"rate limit of {request.app.state.rate_limiter.per_minute} requests a minute per token exceeded",
                headers={"Retry-After": retry_after(wait)},
            )
        return principal

    dependency.__name__ = f"require_{scope}"
    return dependency


SessionDep = Annotated[Session, _session]
SettingsDep = Annotated[Settings, Depends(get_settings)]
# Route parameters (``by: Submitter``) where the handler needs the caller, ``dependencies=[...]`` otherwise.
Submitter = Annotated[Principal, Depends(require_scope(TokenScope.SUBMIT))]
WorkerAuth = Depends(require_scope(TokenScope.WORKER))
AdminAuth = Depends(require_scope(TokenScope.ADMIN))
