"""The FastAPI application: wires settings, the pool, each domain's services, the
maintenance loops and the routes together. The one module that knows every domain."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi.telemetry import TelemetryConfig
from starlette.routing import BaseRoute

from app import __version__, health, jobs, keys, queues, schedules, ui
from app.api import openapi, problems
from app.api.body_limit import BodySizeLimit
from app.api.middleware import RequestContext
from app.core import metrics, shutdown
from app.core.config import Settings, get_settings
from app.core.errors import DatabaseUnavailable
from app.core.retry import Backoff
from app.core.signals import on_shutdown_signal
from app.db.database import Database
from app.db.engine import behind_pooler, create_engine, direct_url, resolve_database_url
from app.db.listener import DueListener
from app.maintenance import MaintenanceRepository, Pruner, Reaper, Vacuumer, run_periodically

log = logging.getLogger("jobq")

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
        db = Database(engine)
        app.state.db = db
        auth = keys.Authenticator(
            keys.KeysRepository(db),
            disabled=settings.auth == "disabled",
            loopback=keys.is_loopback(settings.host),
            cache_seconds=settings.auth_cache_seconds,
        )
        try:
            await auth.start(settings.host)  # AuthRequired: no key, and not on loopback
        except BaseException:
            await engine.dispose()
            raise
        app.state.auth = auth
        wakeups = jobs.Wakeups(
            poll_seconds=settings.longpoll_poll_seconds,
            recheck_seconds=settings.longpoll_recheck_seconds,
        )
        app.state.wakeups = wakeups
        finishes = jobs.Finishes(
            poll_seconds=settings.longpoll_poll_seconds,
            recheck_seconds=settings.longpoll_recheck_seconds,
        )
        app.state.engine = engine
        jobs_repo = jobs.JobsRepository(db)
        limited = jobs.LimitedQueues(jobs_repo)

        def listening(up: bool) -> None:
            wakeups.listening = finishes.listening = up
            auth.listening = up
            if up:
                wakeups.wake_all()  # announcements may have been missed while down
                finishes.wake_all()
                auth.forget()
                limited.forget()

        listener = DueListener(
            direct_url(settings, url),  # LISTEN holds its session: never through a pooler
            on_due=wakeups.announce,
            on_state=listening,
            on_hearing=wakeups.heard,
            on_keys=auth.notified,
            on_finished=finishes.announce,
            on_settings=lambda _queue: limited.forget(),
        )
        wakeups.hear_with(listener.hear_due, jobs_repo.next_due)
        app.state.listener = listener
        tasks = [
            asyncio.create_task(listener.run(), name="listener"),
            asyncio.create_task(metrics.sample_pool_every(engine), name="pool gauge"),
        ]
        app.state.jobs = jobs.JobServices.build(jobs_repo, settings, wakeups, finishes, limited)
        with contextlib.suppress(DatabaseUnavailable):  # the SQL functions use what it can
            await jobs_repo.record_limits(jobs.enqueue_limits(settings))
        app.state.queues = queues.QueueServices.build(
            queues.QueuesRepository(db), stats_refresh_seconds=settings.metrics_refresh_seconds
        )
        maintenance = MaintenanceRepository(db)
        app.state.reaper = Reaper(
            maintenance,
            backoff=Backoff.from_settings(settings),
            interval_seconds=settings.reaper_interval_seconds,
            batch_size=settings.reaper_batch_size,
        )
        app.state.pruner = Pruner(
            maintenance,
            retain_succeeded_seconds=settings.retain_succeeded_seconds,
            retain_failed_seconds=settings.retain_failed_seconds,
            interval_seconds=settings.prune_interval_seconds,
            batch_size=settings.prune_batch_size,
        )
        app.state.vacuumer = Vacuumer(
            maintenance, interval_seconds=settings.vacuum_interval_seconds
        )
        schedules_repo = schedules.SchedulesRepository(db)
        app.state.schedules = schedules.Schedules(schedules_repo, settings)
        app.state.scheduler = schedules.Scheduler(
            schedules_repo, interval_seconds=settings.scheduler_interval_seconds
        )
        app.state.background_reaper = app.state.reaper if run_maintenance else None
        if run_maintenance:
            for name, service in (
                ("reaper", app.state.reaper),
                ("pruner", app.state.pruner),
                ("scheduler", app.state.scheduler),
                ("vacuum", app.state.vacuumer),
            ):
                if not service.interval_seconds:
                    continue  # turned off (the vacuum's 0)
                loop = run_periodically(name, service.run_once, service.interval_seconds)
                tasks.append(asyncio.create_task(loop, name=name))
        try:
            # Long-polling requests would hold shutdown up to their wait: release them
            # as soon as the signal arrives, before the server waits for requests.
            def release_waiters() -> None:
                wakeups.close_threadsafe()
                finishes.close_threadsafe()

            with on_shutdown_signal(release_waiters):
                yield
        finally:
            wakeups.close()
            finishes.close()
            await shutdown.stop_tasks(tasks)
            await shutdown.within(engine.dispose(), "closing the database pool")
            metrics.process_exited()

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
        jobs.routes.workers,
        keys.router,
        jobs.routes.operators,
        queues.routes.operators,
        queues.routes.settings,
        queues.routes.stats,
        schedules.router,
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
