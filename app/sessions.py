"""The request's database session and settings, as FastAPI dependencies: the API's routes and the pages share them."""

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.config import Settings
from app.db import session_scope


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


SessionDep = Annotated[Session, _session]
SettingsDep = Annotated[Settings, Depends(get_settings)]
