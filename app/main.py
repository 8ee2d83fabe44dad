"""The composition root: builds the FastAPI app from settings, migrating the database first."""

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI, Request, status
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError

from app import db
from app.admission import AdmissionMiddleware
from app.auth.ratelimit import RateLimiter
from app.auth.router import router as tokens_router
from app.config import Settings, get_settings
from app.crashes.router import router as crashes_router
from app.errors import InputError, NotFoundError
from app.jobs.queue import NotLeasedError
from app.jobs.router import router as jobs_router
from app.limits import BodyLimitMiddleware
from app.metrics.router import router as metrics_router
from app.metrics.service import Metrics
from app.results.router import router as results_router
from app.schemas.sweep import SweepSpec
from app.sweeps.router import router as sweeps_router
from app.workers.router import router as workers_router
from dashboards.cache import FinishedSweeps
from dashboards.views import router as dashboards_router

log = logging.getLogger("draftbench")

API_ROUTERS = (sweeps_router, jobs_router, results_router, crashes_router, workers_router, metrics_router, tokens_router)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Migrate the database to the newest schema (or refuse to start), then wire the routers."""
    settings = settings or get_settings()
    db.upgrade(settings.database_url)
    engine = db.make_engine(settings.database_url)
    db.check_current(engine)

    app = FastAPI(
        lifespan=_lifespan,
        title="draftbench",
        version="0.1.0",
        description="Speculative decoding in vLLM across attention backends, CUDA-graph modes, GPUs and builds.",
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessionmaker = db.make_sessionmaker(engine)
    app.state.finished_sweeps = FinishedSweeps()
    app.state.rate_limiter = RateLimiter(settings.rate_limit_per_minute)
    app.state.metrics = Metrics(sessions=app.state.sessionmaker, stale_seconds=settings.worker_stale_seconds)
    app.add_middleware(AdmissionMiddleware, limit=db.POOL_SIZE)
    app.add_middleware(BodyLimitMiddleware, max_body=settings.max_body_bytes, max_log=settings.max_log_bytes)
    for router in API_ROUTERS:
        app.include_router(router)
    app.include_router(dashboards_router)
    _install_error_handlers(app)
    app.openapi = lambda: _openapi(app)
    return app


@asynccontextmanager
async def _lifespan(_app: FastAPI) -> AsyncIterator[None]:
    # Sync routes and dependencies run on AnyIO's threads (40 by default); no more of them than
    # pooled connections, so none waits on the pool (see db.POOL_SIZE and app.admission).
    anyio.to_thread.current_default_thread_limiter().total_tokens = db.POOL_SIZE
    # What start-up built (pandas, matplotlib, SQLAlchemy...) lives as long as the server. Frozen, it
    # drops out of the collector's full passes, which otherwise stalled every request in flight for
    # 100-200 ms every few seconds under load (benchmarks/api_load.py).
    gc.freeze()
    yield


def _openapi(app: FastAPI) -> dict:
    """FastAPI's schema plus SweepSpec, which the sweep route parses itself (JSON or YAML)."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        spec_schema = SweepSpec.model_json_schema(ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(spec_schema.pop("$defs", {}))
        components["SweepSpec"] = spec_schema
        app.openapi_schema = schema
    return app.openapi_schema


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(InputError)
    async def _input(_: Request, exc: InputError) -> JSONResponse:
        return JSONResponse({"detail": exc.detail()}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)

    @app.exception_handler(NotFoundError)
    async def _not_found(_: Request, exc: NotFoundError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=status.HTTP_404_NOT_FOUND)

    @app.exception_handler(NotLeasedError)
    async def _not_leased(request: Request, exc: NotLeasedError) -> JSONResponse:
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
