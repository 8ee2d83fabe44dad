"""Domain errors and bad input turned into HTTP answers: always a 4xx naming the field, never a 500."""

import logging

from fastapi import FastAPI, Request, status
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException

from app.errors import ConflictError, InputError, NotFoundError
from app.jobs.queue import NotLeasedError
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

    @app.exception_handler(NotLeasedError)
    @app.exception_handler(ConflictError)
    async def _conflict(request: Request, exc: Exception) -> JSONResponse:
        log.warning("refused %s %s: %s", request.method, request.url.path, exc)
        return JSONResponse({"detail": str(exc)}, status_code=status.HTTP_409_CONFLICT)

    @app.exception_handler(OverflowError)
    @app.exception_handler(DataError)
    async def _out_of_range(request: Request, exc: Exception) -> JSONResponse:
        # An id, offset or count beyond what the database stores (64-bit integers): SQLite's driver
        # raises OverflowError, PostgreSQL a DataError ("out of range"). Bad input, not a server fault.
        log.warning("refused %s %s: %s", request.method, request.url.path, str(exc).splitlines()[0])
        return JSONResponse(
            {"detail": [{"loc": ["request"], "msg": "a value is out of the range the database stores", "type": "value_error"}]},
            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        )


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
