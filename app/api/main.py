"""The composition root: builds the FastAPI app from settings, migrating the database first."""

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import Depends, FastAPI

from app import db, periodic
from app.alerts import service as alerts
from app.api import docs, handlers, security_headers
from app.api.admission import AdmissionMiddleware
from app.api.alarms import router as alarms_router
from app.api.alerts import router as alerts_router
from app.api.bisections import router as bisections_router
from app.api.compare import router as compare_router
from app.api.crashes import router as crashes_router
from app.api.deps import known_query, storable_params, unique_keys
from app.api.jobs import router as jobs_router
from app.api.limits import BodyLimitMiddleware
from app.api.metrics import router as metrics_router
from app.api.noise import router as noise_router
from app.api.parallel import router as parallel_router
from app.api.results import router as results_router
from app.api.speedups import router as speedups_router
from app.api.sweeps import router as sweeps_router
from app.api.tokens import router as tokens_router
from app.api.workers import router as workers_router
from app.auth.ratelimit import RateLimiter
from app.config import Settings, get_settings
from app.jobs import stalled
from app.lru import LRU
from app.metrics.service import Metrics
from app.noise import service as noise
from dashboards import errors as dashboards_errors
from dashboards.cache import FINISHED_SWEEPS, SHOWN_PAGES
from dashboards.pages import router as dashboards_router

API_ROUTERS = (sweeps_router, jobs_router, results_router, alarms_router, compare_router, alerts_router, crashes_router,
               noise_router, speedups_router, parallel_router, bisections_router, workers_router, metrics_router,
               tokens_router)


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
        # Served from the installed package's files by app.api.docs: the defaults load scripts from a CDN.
        docs_url=None,
        redoc_url=None,
        dependencies=[Depends(known_query), Depends(storable_params), Depends(unique_keys)],
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessionmaker = db.make_sessionmaker(engine)
    app.state.finished_sweeps = LRU(FINISHED_SWEEPS)
    app.state.shown_figures = LRU(SHOWN_PAGES)
    app.state.rate_limiter = RateLimiter(settings.rate_limit_per_minute)
    app.state.failed_auth_limiter = RateLimiter(settings.failed_auth_per_minute)
    app.state.metrics = Metrics(sessions=app.state.sessionmaker, lease_seconds=settings.lease_seconds)
    app.add_middleware(AdmissionMiddleware, limit=db.POOL_SIZE)
    app.add_middleware(BodyLimitMiddleware, max_body=settings.max_body_bytes, max_log=settings.max_log_bytes)
    security_headers.install(app)
    for router in API_ROUTERS:
        app.include_router(router)
    app.include_router(dashboards_router)
    docs.install(app)
    handlers.install(app)
    dashboards_errors.install(app)  # after handlers: a page's bad input is answered as a page
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Sync routes and dependencies run on AnyIO's threads (40 by default); no more of them than
    # pooled connections, so none waits on the pool (see db.POOL_SIZE and app.api.admission).
    anyio.to_thread.current_default_thread_limiter().total_tokens = db.POOL_SIZE
    # What start-up built (pandas, matplotlib, SQLAlchemy...) lives as long as the server. Frozen, it
    # drops out of the collector's full passes, which otherwise stalled every request in flight for
    # 100-200 ms every few seconds under load (benchmarks/api_load.py).
    gc.freeze()
    settings: Settings = app.state.settings
    sessions = app.state.sessionmaker
    await periodic.once("noise model", lambda: noise.refresh(sessions))
    async with periodic.running(
        settings.stall_check_seconds,
        ("stalled-job check", lambda: stalled.check_once(sessions, lease_seconds=settings.lease_seconds)),
        # The overview page shows the open regressions as of the last refresh: reading every cell's history
        # (seconds over 100k results) is not the page's to do after each finished job.
        ("alerts refresh", lambda: alerts.refresh(sessions)),
        # The verdicts' noise model likewise: a comparison reads it, kept until another job succeeds.
        ("noise model refresh", lambda: noise.refresh(sessions)),
    ):
        yield
