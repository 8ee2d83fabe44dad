"""Domain errors and bad input turned into HTTP answers: always a 4xx naming the field, never a 500."""

import logging
import re

from fastapi import FastAPI, Request, status
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import BigInteger, Column, Integer, String
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException

from app.errors import ConflictError, InputError, MovedError, NotFoundError
from app.jobs.queue import NotLeasedError
from app.models import Base
from app.schemas.base import unstorable

log = logging.getLogger("draftbench")


def install(app: FastAPI) -> None:
    @app.exception_handler(InputError)
    async def _input(_: Request, exc: InputError) -> JSONResponse:
        return JSONResponse({"detail": exc.detail()}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": [_echo_safe(error) for error in exc.errors()]}, status_code=422)

    # Starlette's class: FastAPI raises it, not its own subclass, for a body it cannot parse.
    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        # FastAPI answers 400 when a JSON body cannot even be decoded (not UTF-8, nested past Python's
        # recursion limit); like any other unreadable body, that is a 422 naming the body.
        if exc.status_code == status.HTTP_400_BAD_REQUEST and exc.__cause__ is not None:
            cause = exc.__cause__
            reason = "nested too deeply" if isinstance(cause, RecursionError) else f"{type(cause).__name__}: {cause}"
            detail = [{"loc": ["body"], "msg": f"body is not valid UTF-8 JSON ({reason})"[:500], "type": "value_error"}]
            return JSONResponse({"detail": detail}, status_code=422)
        return await http_exception_handler(request, exc)

    @app.exception_handler(NotFoundError)
    async def _not_found(_: Request, exc: NotFoundError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=status.HTTP_404_NOT_FOUND)

    @app.exception_handler(MovedError)
    async def _moved(request: Request, exc: MovedError) -> JSONResponse:
        # The path's one segment that names the old item, renamed: the API's and the page's alike.
        parts = [exc.new if part == exc.old else part for part in request.url.path.split("/")]
        location = request.url.replace(path="/".join(parts))
        return JSONResponse({"detail": str(exc)}, status_code=status.HTTP_308_PERMANENT_REDIRECT,
                            headers={"Location": str(location)})

    @app.exception_handler(NotLeasedError)
    @app.exception_handler(ConflictError)
    async def _conflict(request: Request, exc: Exception) -> JSONResponse:
        log.warning("refused %s %s: %s", request.method, request.url.path, exc)
        return JSONResponse({"detail": str(exc)}, status_code=status.HTTP_409_CONFLICT)

    @app.exception_handler(OverflowError)
    @app.exception_handler(DataError)
    async def _out_of_range(request: Request, exc: Exception) -> JSONResponse:
        # A value the database refuses that validation let through: SQLite's driver raises OverflowError
        # (an integer beyond 64 bits), PostgreSQL a DataError (out of range, too long, a NUL). Bad input,
        # not a server fault; the schemas (app.schemas.text, app.schemas.physical) mean to catch it first.
        # An OverflowError of our own arithmetic is a fault, and answered as one, not blamed on the input.
        if isinstance(exc, OverflowError) and not _raised_through_the_database(exc):
            log.error("failed %s %s", request.method, request.url.path, exc_info=exc)
            return JSONResponse({"detail": "internal server error"}, status_code=status.HTTP_500_INTERNAL_SERVER_ERROR)
        log.warning("refused %s %s: %s", request.method, request.url.path, str(exc).splitlines()[0])
        return JSONResponse({"detail": [database_refusal(exc)]}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)


def _raised_through_the_database(exc: BaseException) -> bool:
    """Whether ``exc`` was raised inside SQLAlchemy's call of the driver (a parameter the driver cannot bind)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__", "").startswith("sqlalchemy."):
            return True
        tb = tb.tb_next
    return False


def database_refusal(exc: Exception) -> dict:
    """A refused statement as a validation error naming what it can: the table and column of a write whose
    parameter the column cannot hold (a PostgreSQL DataError carries its statement and parameters). A NUL in a
    path or query parameter never gets here: ``app.api.deps.storable_params`` refuses it on every route first."""
    culprit = _culprit(exc) if isinstance(exc, DataError) else None
    if culprit is not None:
        column, why = culprit
        return {"loc": ["request", column.table.name, column.name], "msg": f"{column.table.name}.{column.name} {why}",
                "type": "value_error"}
    return {"loc": ["request"], "msg": "a value is out of the range the database stores", "type": "value_error"}


_WRITTEN_TABLE = re.compile(r"^\s*(?:INSERT\s+INTO|UPDATE)\s+\"?(\w+)", re.IGNORECASE)
# executemany and insertmanyvalues number their parameters: name__0, name__1...
_NUMBERED = re.compile(r"__\d+$")


def _culprit(exc: DataError) -> tuple[Column, str] | None:
    """The column of the statement's table and why its parameter does not fit, if one is plainly wrong."""
    written = _WRITTEN_TABLE.match(exc.statement or "")
    table = Base.metadata.tables.get(written.group(1)) if written else None
    if table is None:
        return None
    rows = exc.params if isinstance(exc.params, list | tuple) else [exc.params]
    for row in rows:
        for key, value in (row.items() if isinstance(row, dict) else ()):
            column = table.columns.get(_NUMBERED.sub("", key))
            why = None if column is None else _misfit(column, value)
            if why:
                return column, why
    return None


def _misfit(column: Column, value: object) -> str | None:
    kind = column.type
    if isinstance(value, str):
        if "\x00" in value:
            return "cannot hold a NUL character"
        if isinstance(kind, String) and kind.length is not None and len(value) > kind.length:
            return f"holds at most {kind.length} characters, not {len(value)}"
    elif isinstance(value, int) and not isinstance(value, bool) and isinstance(kind, Integer):
        bits = 63 if isinstance(kind, BigInteger) else 31
        if not -(2**bits) <= value < 2**bits:
            return f"holds integers of {bits + 1} bits, and this one is larger"
    return None


def _echo_safe(error: dict) -> dict:
    """One validation error as JSON can carry it: the offending input is echoed only when it is storable
    (NaN, lone surrogates and deep values are not), and short; exception objects in ``ctx`` become text."""
    out = {key: error[key] for key in ("type", "loc", "msg") if key in error}
    out["loc"] = [part if isinstance(part, int) else _text(part)[:200] for part in out.get("loc", [])]
    out["msg"] = _text(out.get("msg", ""))[:1000]
    value = error.get("input")
    if isinstance(value, str | int | float | bool) and unstorable(value) is None and len(repr(value)) <= 200:
        out["input"] = value
    return out


def _text(value: object) -> str:
    return str(value).encode("utf-8", "backslashreplace").decode()
