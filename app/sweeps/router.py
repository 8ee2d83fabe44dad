"""``/api/v1/sweeps``: submit a matrix (JSON or YAML), list, inspect, cancel."""

import json
from typing import Annotated, Any

import yaml
from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from app.deps import SessionDep, SettingsDep, Submitter
from app.schemas.sweep import SweepDetail, SweepSpec, SweepSummary
from app.sweeps import service

router = APIRouter(prefix="/api/v1/sweeps", tags=["sweeps"])

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")


async def _read_spec(request: Request) -> SweepSpec:
    """Parse the body as JSON or YAML by its content type, then validate it as a SweepSpec."""
    raw = await request.body()
    content_type = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    try:
        data: Any = yaml.safe_load(raw) if content_type in YAML_TYPES else json.loads(raw or b"null")
    except (yaml.YAMLError, ValueError, UnicodeDecodeError) as exc:
        kind = "YAML" if content_type in YAML_TYPES else "JSON"
        raise RequestValidationError([{"loc": ["body"], "msg": f"body is not valid {kind}: {exc}", "type": "value_error"}])
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**err, "loc": ["body", *err["loc"]]} for err in exc.errors(include_url=False, include_context=False)]
        ) from None


@router.post(
    "",
    response_model=SweepDetail,
    status_code=status.HTTP_201_CREATED,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/SweepSpec"}},
                "application/yaml": {"schema": {"$ref": "#/components/schemas/SweepSpec"}},
            },
        }
    },
)
def create_sweep(
    by: Submitter,  # first: the caller is checked before the body is read
    spec: Annotated[SweepSpec, Depends(_read_spec)],
    response: Response,
    session: SessionDep,
    settings: SettingsDep,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> SweepDetail:
    """Validate a sweep and queue one job per cell and repeat.

    A repeated Idempotency-Key returns the first sweep with status 200 and creates nothing.
    """
    sweep, created = service.create(
        session=session, spec=spec, settings=settings, idempotency_key=idempotency_key, created_by_token_id=by.token_id
    )
    if not created:
        response.status_code = status.HTTP_200_OK
    return service.detail(session=session, sweep=service.get(session=session, sweep_id=sweep.id))


@router.get("", response_model=list[SweepSummary])
def list_sweeps(
    session: SessionDep, limit: Annotated[int, Query(ge=1, le=500)] = 50, offset: Annotated[int, Query(ge=0)] = 0
) -> list[SweepSummary]:
    return service.summaries(session=session, limit=limit, offset=offset)


@router.get("/{sweep_id}", response_model=SweepDetail)
def get_sweep(sweep_id: int, session: SessionDep) -> SweepDetail:
    return service.detail(session=session, sweep=service.get(session=session, sweep_id=sweep_id))


@router.post("/{sweep_id}/cancel", response_model=SweepSummary)
def cancel_sweep(by: Submitter, sweep_id: int, session: SessionDep) -> SweepSummary:
    """Cancel the sweep's queued and running jobs; workers stop running ones at their next heartbeat.

    An admin token cancels any sweep, a submit token only the sweeps it submitted (403 otherwise).
    """
    if not by.may_cancel(service.get(session=session, sweep_id=sweep_id)):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, f"only the token that submitted sweep {sweep_id}, or an admin token, may cancel it"
        )
    return service.summary(session=session, sweep=service.cancel(session=session, sweep_id=sweep_id))
