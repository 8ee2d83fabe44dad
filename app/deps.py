"""FastAPI dependencies: the request's database session, settings and write authorisation."""

import hmac
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.config import Settings


def get_session(request: Request) -> Iterator[Session]:
    """One transaction per request: committed when the handler returns, rolled back on an error."""
    session: Session = request.app.state.sessionmaker()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


_bearer = HTTPBearer(auto_error=False, description="DRAFTBENCH_TOKEN; needed for every write")


def require_token(
    settings: Annotated[Settings, Depends(get_settings)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    if not settings.token:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "writes are disabled: the service has no DRAFTBENCH_TOKEN")
    if credentials is None or not hmac.compare_digest(credentials.credentials.encode(), settings.token.encode()):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "a valid bearer token is needed for writes",
            headers={"WWW-Authenticate": "Bearer"},
        )


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
WriteAuth = Depends(require_token)
