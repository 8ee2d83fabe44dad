"""The error answers a route can give, for its OpenAPI document: ``responses=answers(401, 404, 422)``.

Every answer the service gives is documented, so clients (and schemathesis's conformance checks)
can rely on the document: a status a route can return but does not list is a defect.
"""

from typing import Any

from fastapi.openapi.constants import REF_PREFIX
from pydantic import BaseModel


class Problem(BaseModel):
    """Every error but 422: one sentence saying what was wrong."""

    detail: str


_DESCRIPTIONS = {
    400: "The request could not be read",
    308: "It lives under another name now (a crash group merged into another): Location gives it",
    401: "No token, or an unknown or revoked one",
    403: "The token lacks the scope, or acts for another worker or submitter",
    404: "No such object",
    409: "The request conflicts with what is stored (a job no longer held, a build's recorded version, a reused key)",
    413: "The body is over the size limit",
    429: "Rate limit exceeded; Retry-After says when to come back",
}


def answers(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error statuses (422 uses FastAPI's validation error shape)."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        if code == 422:
            out[422] = {
                "description": "Bad input: each error names its field (loc) and, for enums, the allowed values",
                "content": {"application/json": {"schema": {"$ref": REF_PREFIX + "HTTPValidationError"}}},
            }
            continue
        answer: dict[str, Any] = {"model": Problem, "description": _DESCRIPTIONS[code]}
        if code == 429:
            answer["headers"] = {"Retry-After": {"description": "Seconds to wait", "schema": {"type": "string"}}}
        if code == 308:
            answer["headers"] = {"Location": {"description": "Where it lives now", "schema": {"type": "string"}}}
        out[code] = answer
    return out
