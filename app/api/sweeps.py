"""``/api/v1/sweeps``: submit a matrix (JSON or YAML), list, inspect, cancel, add paired starts."""

from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from app.api.deps import Submitter
from app.api.responses import answers
from app.enums import TokenScope
from app.schemas.ids import Id
from app.schemas.sweep import MoreRequest, SweepDetail, SweepSpec, SweepSummary
from app.sessions import SessionDep, SettingsDep
from app.sweeps import pairing, parsing, service

router = APIRouter(prefix="/api/v1/sweeps", tags=["sweeps"])


async def _read_spec(request: Request) -> SweepSpec:
    """Parse the body as JSON or YAML by its content type (app.sweeps.parsing), then validate it as a SweepSpec."""
    content_type = request.headers.get("content-type", parsing.JSON_TYPE).split(";")[0].strip().lower()
    if content_type not in parsing.YAML_TYPES and not parsing.is_json(content_type):
        # Before, any other type was read as JSON: a text/plain body (what a browser's form may send) made a sweep.
        allowed = ", ".join((parsing.JSON_TYPE, *parsing.YAML_TYPES))
        raise RequestValidationError([{"loc": ["header", "content-type"], "type": "value_error",
                                       "msg": f"a sweep is JSON or YAML, not {content_type[:100]!r}; allowed values: {allowed}"}])
    try:
        data = parsing.load(await request.body(), content_type)
    except parsing.BodyError as exc:
        raise RequestValidationError([{"loc": ["body"], "msg": str(exc), "type": "value_error"}]) from None
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
    responses={200: {"model": SweepDetail, "description": "The sweep first made with this Idempotency-Key"},
               **answers(401, 403, 409, 413, 422, 429)},
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
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=200)] = None,
) -> SweepDetail:
    """Validate a sweep and queue one job per cell and repeat.

    A ``custom_class`` draft is code execution: only an admin token may submit one (403).
    The same Idempotency-Key from the same token with the same sweep returns the first sweep (200)
    and creates nothing; with a different sweep it is 409. Keys of other tokens are theirs alone. An empty key is
    a 422, not no key: a client that meant one would make a new sweep at each resend.
    ``warnings`` says which jobs no live worker can run yet.
    """
    if service.runs_code(spec) and not by.has(TokenScope.ADMIN):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            "a custom_class draft makes vLLM import and run the class it names: only an admin token may submit it",
        )
    idempotency = service.Idempotency(scope=by.key, key=idempotency_key) if idempotency_key is not None else None
    sweep, created = service.create(
        session=session, spec=spec, settings=settings, idempotency=idempotency, created_by_token_id=by.token_id
    )
    if not created:
        response.status_code = status.HTTP_200_OK
    return service.detail(session=session, sweep=sweep, lease_seconds=settings.lease_seconds)


@router.get("", response_model=list[SweepSummary], responses=answers(422))
def list_sweeps(
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> list[SweepSummary]:
    """Sweeps with their job counts, newest first: by when each was submitted (an imported sweep, when its first run
    started), the later stored first among equal times (``app.newest``)."""
    return service.summaries(session=session, limit=limit, offset=offset)


@router.get("/{sweep_id}", response_model=SweepDetail, responses=answers(404, 422))
def get_sweep(sweep_id: Id, session: SessionDep, settings: SettingsDep) -> SweepDetail:
    return service.detail(
        session=session, sweep=service.get(session=session, sweep_id=sweep_id), lease_seconds=settings.lease_seconds
    )


@router.post("/{sweep_id}/cancel", response_model=SweepSummary, responses=answers(401, 403, 404, 422, 429))
def cancel_sweep(by: Submitter, sweep_id: Id, session: SessionDep) -> SweepSummary:
    """Cancel the sweep's queued and running jobs; workers stop running ones at their next heartbeat.

    An admin token cancels any sweep, a submit token only the sweeps it submitted (403 otherwise).
    """
    if not by.may_cancel(service.get(session=session, sweep_id=sweep_id)):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, f"only the token that submitted sweep {sweep_id}, or an admin token, may cancel it"
        )
    return service.summary(session=session, sweep=service.cancel(session=session, sweep_id=sweep_id))


@router.post("/{sweep_id}/more", response_model=SweepDetail, responses=answers(401, 403, 404, 409, 413, 422, 429))
def more_starts(
    by: Submitter, sweep_id: Id, body: MoreRequest, session: SessionDep, settings: SettingsDep
) -> SweepDetail:
    """More paired starts of some cells (by cell index) of a paired sweep: each pair adds a job to this sweep and
    one to its partner (the sweep it is paired with, either side), at the cell's next repeat, run back to back on
    one worker like the first; both sweeps go back to running. Answers this sweep.

    409 when the sweep is paired with no other or either is cancelled; 422 naming the field for a cell index the
    sweep lacks, one listed twice, or more jobs than ``DRAFTBENCH_MAX_JOBS``. The token that submitted both
    sweeps, or an admin token, may add starts (403 otherwise).
    """
    sweep = service.get(session=session, sweep_id=sweep_id)
    partner = pairing.partner(session=session, sweep_id=sweep.id)
    owned = [sweep] + ([service.get(session=session, sweep_id=partner)] if partner is not None else [])
    if not all(by.may_cancel(each) for each in owned):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"only the token that submitted sweep {sweep_id} and its "
                                                       "partner, or an admin token, may add starts to them")
    service.more(session=session, sweep=sweep, request=body, settings=settings)
    return service.detail(session=session, sweep=sweep, lease_seconds=settings.lease_seconds)
