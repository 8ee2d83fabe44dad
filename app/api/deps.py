"""FastAPI dependencies of the API: who may write (tokens, scopes, workers) and the job a route names."""

from collections.abc import Callable
from typing import Annotated

import anyio.to_thread
from fastapi import Depends, HTTPException, Path, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app import strict_json
from app.auth import addresses
from app.auth import service as tokens
from app.auth.ratelimit import retry_after
from app.auth.service import Principal
from app.config import Settings
from app.enums import TokenScope
from app.errors import NotFoundError
from app.jobs import queue
from app.models import Job
from app.schemas.ids import Id
from app.sessions import SessionDep, SettingsDep
from app.sweeps import parsing

_bearer = HTTPBearer(
    auto_error=False, description="An API token (`draftbench token create`) or the bootstrap DRAFTBENCH_TOKEN"
)


def authenticate(
    request: Request,
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Who is calling: 401 for a missing, unknown or revoked token (or one issued under a revoked token).

    Failed attempts are rate-limited per client address. While an address's bucket of failures is
    spent, every attempt from it gets the same 429, the right bootstrap token too, so guessing a token a
    person chose cannot go faster than the limit; only tokens this service issued are still read, as
    their 256 random bits cannot be guessed at any rate: a flood of bad tokens from an address that
    others share (a NAT, a proxy not in ``trusted_proxies``) never locks out the workers and CI behind it.
    """
    settings: Settings = request.app.state.settings
    limiter = request.app.state.failed_auth_limiter
    key = addresses.client_key(request, trusted=settings.trusted_proxies)
    wait = limiter.wait(key)
    principal = None
    if credentials is not None and (not wait or credentials.credentials.startswith(tokens.PREFIX)):
        principal = tokens.authenticate(session=session, secret=credentials.credentials,
                                        bootstrap="" if wait else settings.token)
    if principal is None and wait:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"too many failed authentications from this address (limit {limiter.per_minute} a minute)",
            headers={"Retry-After": retry_after(wait)},
        )
    if principal is None:
        limiter.take(key)
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
        _limit(request, principal.key)
        return principal

    dependency.__name__ = f"require_{scope}"
    return dependency


def _limit(request: Request, key: str) -> None:
    limiter = request.app.state.rate_limiter
    wait = limiter.take(key)
    if wait:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"rate limit of {limiter.per_minute} requests a minute exceeded",
            headers={"Retry-After": retry_after(wait)},
        )


# Route parameters (``by: Submitter``) where the handler needs the caller, ``dependencies=[...]`` otherwise.
Submitter = Annotated[Principal, Depends(require_scope(TokenScope.SUBMIT))]
WorkerScope = Annotated[Principal, Depends(require_scope(TokenScope.WORKER))]
AdminAuth = Depends(require_scope(TokenScope.ADMIN))


def _issuing(principal: Principal) -> Principal:
    """The caller may issue a token only if that token's chain stays within ``MAX_CHAIN`` (403 otherwise)."""
    if principal.depth >= tokens.MAX_CHAIN:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            f"this token's chain (itself and the tokens that issued it) already holds {tokens.MAX_CHAIN} tokens, "
            "the most a chain may: it issues none; use a token nearer the root, or `draftbench token create`",
        )
    return principal


def admin_issuer(principal: Annotated[Principal, AdminAuth]) -> Principal:
    return _issuing(principal)


def registering_host(principal: WorkerScope) -> Principal:
    """A host's token, which registers workers: never a worker's own credential (403).

    A credential registering workers would mint credentials of its own, and a worker that holds
    one could then outlive everything its host was given.
    """
    if principal.worker_id is not None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            "registering a worker needs a host's token (a 'worker'-scope token from `draftbench token create "
            "--scope worker` or POST /api/v1/tokens), not a worker's credential",
        )
    return _issuing(principal)


AdminIssuer = Annotated[Principal, Depends(admin_issuer)]
RegisteringHost = Annotated[Principal, Depends(registering_host)]


def acting_worker(principal: WorkerScope) -> int:
    """The worker the caller's credential belongs to: 403 for any token that is not a worker's own.

    A host's token registers workers; each registration answers with the worker's own credential,
    and only that credential claims, beats, logs and reports for it. So one worker (or one host)
    cannot claim, heartbeat or complete for another, whatever scope its token has.
    """
    if principal.worker_id is None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            "worker routes need the credential that registering the worker returned (POST /api/v1/workers)",
        )
    return principal.worker_id


def worker_in_path(worker_id: Annotated[Id, Path()], acting: Annotated[int, Depends(acting_worker)]) -> int:
    """The path's worker, which must be the caller's own (403 otherwise)."""
    if worker_id != acting:
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"this credential acts for worker {acting}, not worker {worker_id}")
    return worker_id


def existing_job(job_id: Annotated[Id, Path()], session: SessionDep) -> Job:
    """The path's job, or 404."""
    job = session.get(Job, job_id)
    if job is None:
        raise NotFoundError("job", job_id)
    return job


ActingWorker = Annotated[int, Depends(acting_worker)]
PathWorker = Annotated[int, Depends(worker_in_path)]
ExistingJob = Annotated[Job, Depends(existing_job)]


def held_job(worker_id: ActingWorker, job: ExistingJob, session: SessionDep, settings: SettingsDep) -> Job:
    """The path's job, which the caller's worker must hold while alive: 404, 403, else 409 (NotLeasedError)."""
    return queue.hold(session=session, job_id=job.id, worker_id=worker_id, lease_seconds=settings.lease_seconds)


HeldJob = Annotated[Job, Depends(held_job)]


# Unknown query parameters one answer names at most.
MAX_UNKNOWN_NAMED = 10


def known_query(request: Request) -> None:
    """422 for query parameters the route does not declare: a misspelt filter must not return every row.

    One error however many there are: it names the first (``loc``), lists the allowed names once, then the unknown
    ones up to ``MAX_UNKNOWN_NAMED``. An error per name, each with the allowed list, made a 24 KB URL of 3,000
    names a 686 KB answer.
    """
    route = request.scope.get("route")
    if route is None or not request.query_params:
        return
    allowed = _query_names(route)
    unknown = list(dict.fromkeys(name for name in request.query_params if name not in allowed))
    if not unknown:
        _once(request)
        return
    listed = ", ".join(sorted(allowed)) or "none"
    msg = f"unknown query parameter; allowed: {listed}"
    if len(unknown) > 1:
        named = ", ".join(unknown[:MAX_UNKNOWN_NAMED])
        more = len(unknown) - MAX_UNKNOWN_NAMED
        msg = f"{len(unknown)} unknown query parameters; allowed: {listed}; unknown: {named}" + (f" and {more} more" if more > 0 else "")
    raise RequestValidationError([{"loc": ["query", unknown[0]], "msg": msg, "type": "value_error"}])


def _once(request: Request) -> None:
    """422 naming a query parameter given more than once: no route declares a list, so the last value was taken
    silently (``?state=queued&state=running`` listed the running jobs alone, with a 200)."""
    names = [name for name, _ in request.query_params.multi_items()]
    twice = next((name for name in dict.fromkeys(names) if names.count(name) > 1), None)
    if twice is not None:
        raise RequestValidationError([{"loc": ["query", twice], "type": "value_error",
                                       "msg": f"given {names.count(twice)} times; give it once (it takes one value)"}])


async def unique_keys(request: Request) -> None:
    """422 naming ``body`` (and the key) for a JSON body whose object gives a key twice or that is not UTF-8, on every
    route that reads one.

    JSON's parsers keep the last value silently (``{"outcome": {"exit_code": 1, "exit_code": 0}}`` reported 0); a
    sweep's body has been refused so since ``app.sweeps.parsing``, the rest now too. Read again from the body FastAPI
    already read, off the event loop: a report may weigh megabytes.
    """
    route = request.scope.get("route")
    if getattr(route, "body_field", None) is None or not parsing.is_json(request.headers.get("content-type")):
        return
    body = await request.body()
    if not body:
        return
    problem = await anyio.to_thread.run_sync(strict_json.problem, body)
    if problem is not None:
        raise RequestValidationError([{"loc": ["body"], "msg": f"body is not valid JSON: {problem}", "type": "value_error"}])


def storable_params(request: Request) -> None:
    """422 naming a path or query parameter that holds a NUL character, on every route and page, before any query runs.

    PostgreSQL cannot compare text holding one and refused the statement, while SQLite compared it and found nothing
    (200, or 404): the two databases answered one request differently.
    """
    for where, items in (("path", request.path_params.items()), ("query", request.query_params.multi_items())):
        for name, value in items:
            if isinstance(value, str) and "\x00" in value:
                raise RequestValidationError([{"loc": [where, name], "type": "value_error",
                                               "msg": "holds a NUL character, which the database cannot compare"}])


_QUERY_NAMES: dict[int, frozenset[str]] = {}


def _query_names(route: object) -> frozenset[str]:
    """The query parameters a route and all its dependencies declare (FastAPI's Dependant tree)."""
    key = id(route)
    if key not in _QUERY_NAMES:
        names: set[str] = set()
        stack = [getattr(route, "dependant", None)]
        while stack:
            dependant = stack.pop()
            if dependant is not None:
                names.update(param.alias for param in dependant.query_params)
                stack.extend(dependant.dependencies)
        _QUERY_NAMES[key] = frozenset(names)
    return _QUERY_NAMES[key]
