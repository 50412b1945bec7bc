"""The FastAPI application: wiring of settings, pool, service, reaper and routes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from app import __version__
from app.api import openapi, problems
from app.api.auth import KeyGate
from app.api.body_limit import BodySizeLimit
from app.api.middleware import RequestContext
from app.api.routes import admin, health, jobs, keys, leases, queue_settings
from app.api.routes import metrics as metrics_routes
from app.api.routes import queues as queues_routes
from app.core import metrics
from app.core.config import Settings, get_settings
from app.core.signals import on_shutdown_signal
from app.db.engine import create_engine, resolve_database_url
from app.db.listener import DueListener
from app.db.repository import JobsRepository
from app.service.admin import AdminService
from app.service.auth import Authenticator, is_loopback
from app.service.jobs import JobService, backoff_from
from app.service.maintenance import run_periodically
from app.service.pruner import Pruner
from app.service.queue_settings import QueueSettingsService
from app.service.reaper import Reaper
from app.service.stats import StatsService
from app.service.wakeups import Wakeups

log = logging.getLogger("jobq")

DESCRIPTION = """\
A PostgreSQL-backed job queue. Producers enqueue jobs; workers lease them, send
heartbeats with progress, then complete or fail each one. Delivery is at least once;
a lease token fences every transition, so a worker whose lease was taken away can
never finish the job under the new holder. Every error is `application/problem+json`
with a stable `code`.
"""


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
        engine = create_engine(url, settings.db_pool_size)
        metrics.watch_pool(engine)
        repo = JobsRepository(engine)
        auth = Authenticator(
            repo,
            disabled=settings.auth == "disabled",
            loopback=is_loopback(settings.host),
            cache_seconds=settings.auth_cache_seconds,
        )
        try:
            await auth.start(settings.host)  # AuthRequired: no key, and not on loopback
        except BaseException:
            await engine.dispose()
            raise
        app.state.auth = auth
        wakeups = Wakeups(
            poll_seconds=settings.longpoll_poll_seconds,
            recheck_seconds=settings.longpoll_recheck_seconds,
        )
        app.state.wakeups = wakeups
        app.state.engine = engine

        def listening(up: bool) -> None:
            wakeups.listening = up
            auth.listening = up
            if up:
                wakeups.wake_all()  # announcements may have been missed while down
                auth.forget()

        listener = DueListener(
            url, on_due=wakeups.announce, on_state=listening, on_keys=auth.notified
        )
        tasks = [asyncio.create_task(listener.run())]
        app.state.jobs = JobService(repo, settings, wakeups)
        app.state.admin = AdminService(repo)
        app.state.queue_settings = QueueSettingsService(repo)
        app.state.reaper = Reaper(
            repo,
            backoff=backoff_from(settings),
            interval_seconds=settings.reaper_interval_seconds,
            batch_size=settings.reaper_batch_size,
        )
        app.state.pruner = Pruner(
            repo,
            retain_succeeded_seconds=settings.retain_succeeded_seconds,
            retain_failed_seconds=settings.retain_failed_seconds,
            interval_seconds=settings.prune_interval_seconds,
            batch_size=settings.prune_batch_size,
        )
        app.state.background_reaper = app.state.reaper if run_maintenance else None
        app.state.stats = StatsService(repo, refresh_seconds=settings.metrics_refresh_seconds)
        if run_maintenance:
            for name, service in (("reaper", app.state.reaper), ("pruner", app.state.pruner)):
                loop = run_periodically(name, service.run_once, service.interval_seconds)
                tasks.append(asyncio.create_task(loop))
        try:
            # Long-polling requests would hold shutdown up to their wait: release them
            # as soon as the signal arrives, before the server waits for requests.
            with on_shutdown_signal(wakeups.close_threadsafe):
                yield
        finally:
            wakeups.close()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await engine.dispose()
            metrics.process_exited()

    app = FastAPI(
        title="jobq",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    problems.install(app)
    app.include_router(health.router)
    app.include_router(jobs.router)
    app.include_router(leases.router)
    app.include_router(keys.router)
    app.include_router(admin.router)
    app.include_router(queue_settings.router)
    app.include_router(queues_routes.router)
    app.include_router(metrics_routes.router)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_request_bytes)
    app.add_middleware(KeyGate)  # a body without a valid key is never read
    app.add_middleware(RequestContext, access_log=settings.access_log)  # outermost: sees all

    def custom_openapi() -> dict[str, Any]:
        return openapi.build(app)

    app.openapi = custom_openapi  # type: ignore[method-assign]
    return app
