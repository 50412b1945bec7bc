"""The FastAPI application: the routes of every domain, the middleware, the OpenAPI
document, and a lifespan that builds and runs the service's parts (`app.services`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi.telemetry import TelemetryConfig
from starlette.routing import BaseRoute

from app import (
    __version__,
    audit,
    events,
    health,
    jobs,
    keys,
    push,
    queues,
    schedules,
    services,
    ui,
    workers,
)
from app.api import openapi, problems
from app.api.body_limit import BodySizeLimit
from app.api.middleware import RequestContext
from app.core.config import Settings, get_settings
from app.db.engine import behind_pooler, create_engine, resolve_database_url

DESCRIPTION = """\
A PostgreSQL-backed job queue. Producers enqueue jobs; workers lease them, send
heartbeats with progress, then complete or fail each one. Delivery is at least once;
a lease token fences every transition, so a worker whose lease was taken away can
never finish the job under the new holder. Every error is `application/problem+json`
with a stable `code`.
"""
# FastAPI's own OpenTelemetry instrumentation, off unless `JOBQ_OPENTELEMETRY`: when on,
# each request asks OpenTelemetry whether a provider is configured.
TELEMETRY_OFF: TelemetryConfig = {
    "tracing": False,
    "metrics": False,
    "logs": False,
    "operation_spans": False,
}


def create_app(
    settings: Settings | None = None,
    *,
    database_url: str | None = None,
    run_maintenance: bool = True,
) -> FastAPI:
    """The service. `database_url` overrides the settings (tests, `jobq serve`).

    `run_maintenance=False` leaves the reaper and pruner to the caller (tests call
    their `run_once()`).
    """
    settings = settings or get_settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        url = database_url or await resolve_database_url(settings)
        engine = create_engine(url, settings.db_pool_size, pooler=behind_pooler(settings))
        built = services.build(settings, engine, url=url, run_maintenance=run_maintenance)
        app.state.services = built
        async with built.running():
            yield

    app = FastAPI(
        title="jobq",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served by app.ui, its assets from the package
        redoc_url=None,
        telemetry=None if settings.opentelemetry else TELEMETRY_OFF,
    )
    problems.install(app)
    # In the order the OpenAPI document has always listed them.
    for router in (
        health.router,
        jobs.routes.producers,
        workers.router,
        jobs.routes.workers,
        keys.router,
        jobs.routes.operators,
        queues.routes.operators,
        queues.routes.settings,
        queues.routes.stats,
        push.routes.router,
        schedules.router,
        events.router,
        audit.router,
        health.metrics_router,
    ):
        # Flat, not `include_router`: FastAPI matches an included router's routes twice
        # per request, through wrappers.
        app.router.routes.extend(router.routes)
    ui.mount(app)
    documented = list(app.router.routes)
    app.router.routes[:] = _per_job_first(app.router.routes)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_request_bytes)
    app.add_middleware(keys.KeyGate)  # a body without a valid key is never read
    app.add_middleware(RequestContext, access_log=settings.access_log)  # outermost: sees all

    def custom_openapi() -> dict[str, Any]:
        if app.openapi_schema is None:  # the first call builds it, and keys it, once
            keys.document_keys(app, openapi.build(app, documented))
        return openapi.build(app, documented)  # as built

    app.openapi = custom_openapi  # type: ignore[method-assign]
    return app


def _per_job_first(routes: list[BaseRoute]) -> list[BaseRoute]:
    """The routes in the order FastAPI should try them: it tries each in turn for every
    request, so the workers' and producers' calls, made for every job, come first (each
    route tried in vain costs a path match). Their
    order among themselves, and the rest's, is kept; no two routes of the API match the
    same method and path, so only the OpenAPI document's order depended on it."""
    per_job = [*jobs.routes.workers.routes, *jobs.routes.producers.routes]
    return [*per_job, *(route for route in routes if route not in per_job)]
