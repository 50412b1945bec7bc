"""The composition root: every part of a running jobq, built once from the settings and
the pool by `build`, held in one typed `Services`.

The app's lifespan (`app.main`) builds it, runs it (`Services.running`: the background
parts started in order, stopped in the reverse order) and keeps it on
`app.state.services`; `services(request)` gives it to the routes of the service as a
whole, and each domain's routes take their part of it (`app.jobs.routes.deps`, …).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncEngine

from app import keys, push
from app.audit import AuditLog, AuditPruner, AuditRepository
from app.core import metrics
from app.core.background import Background, Step, Task, running
from app.core.config import Settings
from app.core.errors import DatabaseUnavailable
from app.core.retry import Backoff
from app.core.signals import on_shutdown_signal
from app.db.database import Database
from app.db.engine import direct_url
from app.db.listener import DueListener
from app.delivery import Allowlist, Breakers, DeliveryRepository, create_transport
from app.events import (
    Dispatcher as EventDispatcher,
)
from app.events import (
    EventBell,
    EventsPruner,
    EventsRepository,
    EventStreams,
    Stamper,
    Subscriptions,
    SubscriptionsRepository,
)
from app.jobs import Finishes, JobServices, JobsRepository, LimitedQueues, Wakeups, enqueue_limits
from app.maintenance import (
    MaintenanceRepository,
    Pruner,
    Reaper,
    StatisticsKeeper,
    Vacuumer,
    run_periodically,
)
from app.queues import QueueServices, QueuesRepository
from app.schedules import Scheduler, Schedules, SchedulesRepository
from app.workers import Presence, Workers, WorkersPruner, WorkersRepository


@dataclass(frozen=True, slots=True)
class Services:
    """Everything a running jobq is made of: what the routes call, and what runs beside
    them (`background`, in the order it starts)."""

    settings: Settings
    engine: AsyncEngine
    db: Database
    auth: keys.Authenticator
    wakeups: Wakeups
    finishes: Finishes
    listener: DueListener
    jobs: JobServices
    queues: QueueServices
    schedules: Schedules
    reaper: Reaper
    pruner: Pruner
    vacuumer: Vacuumer
    statistics: StatisticsKeeper
    scheduler: Scheduler
    dispatcher: push.Dispatcher
    push_health: push.PushHealthService
    events: EventStreams
    stamper: Stamper
    events_pruner: EventsPruner
    subscriptions: Subscriptions
    event_dispatcher: EventDispatcher
    audit: AuditLog
    audit_pruner: AuditPruner
    presence: Presence
    workers: Workers
    workers_pruner: WorkersPruner
    background: tuple[Background, ...]
    background_reaper: Reaper | None  # the reaper, when this process runs its loop

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Services]:
        """The background parts running for the block. Long-polling requests would hold
        shutdown up to their wait: they are released as soon as the signal arrives,
        before the server waits for the requests in flight."""
        async with running(self.background):
            with on_shutdown_signal(self._release_waiters):
                yield self

    def _release_waiters(self) -> None:
        self.wakeups.close_threadsafe()
        self.finishes.close_threadsafe()
        self.events.bell.close_threadsafe()


def build(
    settings: Settings, engine: AsyncEngine, *, url: str, run_maintenance: bool = True
) -> Services:
    """jobq's parts on `engine`, the pool of `url`; `run_maintenance=False` leaves the
    maintenance passes (reaper, pruner, scheduler, vacuum) to the caller (tests call
    their `run_once()`)."""
    db = Database(engine)
    auth = keys.Authenticator(
        keys.KeysRepository(db),
        disabled=settings.auth == "disabled",
        loopback=keys.is_loopback(settings.host),
        cache_seconds=settings.auth_cache_seconds,
    )
    waits = {
        "poll_seconds": settings.longpoll_poll_seconds,
        "recheck_seconds": settings.longpoll_recheck_seconds,
    }
    wakeups = Wakeups(**waits)
    bell = EventBell()
    finishes = Finishes(**waits)
    jobs_repo = JobsRepository(db)
    limited = LimitedQueues(jobs_repo)
    workers_repo = WorkersRepository(db)
    presence = Presence(workers_repo, interval_seconds=settings.worker_flush_seconds)
    allowlist = Allowlist.parse(settings.push_allowed_targets)
    push_repo = push.PushRepository(db)
    push_targets = push.PushTargets(push_repo, allowlist)
    job_services = JobServices.build(jobs_repo, settings, wakeups, finishes, limited, presence)
    breakers = Breakers.from_settings(DeliveryRepository(db), settings)
    push_health = push.PushHealthService(push_targets, breakers, push_repo)
    dispatcher = push.Dispatcher(
        push_targets,
        job_services,
        breakers,
        allowlist,
        push_repo,
        concurrency=settings.push_concurrency,
        max_lease_batch=settings.max_lease_batch,
        max_ack_batch=settings.max_ack_batch,
        max_body_bytes=settings.max_payload_bytes,
        drain_seconds=min(settings.shutdown_grace_seconds, push.DRAIN_SECONDS),
        lease_margin_seconds=settings.push_lease_margin_seconds,
        flush_seconds=settings.push_stats_flush_seconds,
    )

    def settings_changed(_queue: str) -> None:
        limited.forget()
        dispatcher.forget()

    def listening(up: bool) -> None:
        wakeups.listening = finishes.listening = up
        auth.listening = up
        if up:
            wakeups.wake_all()  # announcements may have been missed while down
            finishes.wake_all()
            auth.forget()
            limited.forget()
            bell.ring()  # stamps may have been announced while down

    listener = DueListener(
        direct_url(settings, url),  # LISTEN holds its session: never through a pooler
        on_due=wakeups.announce,
        on_state=listening,
        on_hearing=wakeups.heard,
        on_keys=auth.notified,
        on_finished=finishes.announce,
        on_settings=settings_changed,
        on_events=bell.ring,
    )
    wakeups.hear_with(listener.hear_due, jobs_repo.next_due)
    maintenance = MaintenanceRepository(db)
    reaper = Reaper(
        maintenance,
        backoff=Backoff.from_settings(settings),
        interval_seconds=settings.reaper_interval_seconds,
        batch_size=settings.reaper_batch_size,
    )
    pruner = Pruner(
        maintenance,
        retain_succeeded_seconds=settings.retain_succeeded_seconds,
        retain_failed_seconds=settings.retain_failed_seconds,
        interval_seconds=settings.prune_interval_seconds,
        batch_size=settings.prune_batch_size,
        pause_seconds=settings.prune_pause_seconds,
    )
    vacuumer = Vacuumer(maintenance, interval_seconds=settings.vacuum_interval_seconds)
    statistics = StatisticsKeeper(
        maintenance,
        interval_seconds=settings.stats_fold_interval_seconds,
        batch_size=settings.stats_fold_batch_size,
        retention_days=settings.stats_retention_days,
    )
    events_repo = EventsRepository(db)
    stamper = Stamper(
        events_repo,
        interval_seconds=settings.event_stamp_interval_seconds,
        batch_size=settings.event_stamp_batch_size,
        on_stamped=bell.ring,
    )
    events_pruner = EventsPruner(
        events_repo,
        retain_seconds=settings.event_retention_seconds,
        interval_seconds=settings.prune_interval_seconds,
        batch_size=settings.prune_batch_size,
    )
    subscriptions_repo = SubscriptionsRepository(db)
    event_dispatcher = EventDispatcher(
        subscriptions_repo,
        events_repo,
        allowlist,
        breakers,
        partial(create_transport, max_connections=4),
        bell,
        interval_seconds=settings.subscription_interval_seconds,
        batch_size=settings.subscription_batch_size,
        window=settings.event_page_size,
        timeout_seconds=settings.subscription_timeout_seconds,
        backoff_base_seconds=settings.subscription_backoff_base_seconds,
        backoff_cap_seconds=settings.subscription_backoff_cap_seconds,
    )
    audit_repo = AuditRepository(db)
    audit_pruner = AuditPruner(
        audit_repo,
        retention_days=settings.audit_retention_days,
        interval_seconds=settings.prune_interval_seconds,
        batch_size=settings.prune_batch_size,
    )
    workers_pruner = WorkersPruner(
        workers_repo,
        retain_seconds=settings.worker_retain_seconds,
        interval_seconds=settings.prune_interval_seconds,
    )
    schedules_repo = SchedulesRepository(db)
    scheduler = Scheduler(schedules_repo, interval_seconds=settings.scheduler_interval_seconds)

    async def record_limits() -> None:
        with contextlib.suppress(DatabaseUnavailable):  # the SQL functions use what it can
            await jobs_repo.record_limits(enqueue_limits(settings))

    async def close_waiters() -> None:
        wakeups.close()
        finishes.close()
        bell.close()

    async def process_exited() -> None:
        metrics.process_exited()

    loops: tuple[Background, ...] = ()
    if run_maintenance:
        loops = tuple(
            Task(name, partial(run_periodically, name, part.run_once, part.interval_seconds))
            for name, part in (
                ("reaper", reaper),
                ("pruner", pruner),
                ("event pruner", events_pruner),
                ("audit pruner", audit_pruner),
                ("workers pruner", workers_pruner),
                ("scheduler", scheduler),
                ("vacuum", vacuumer),
                ("statistics", statistics),
            )
            if part.interval_seconds  # 0: turned off (the vacuum's, the audit's kept for good)
        )
    return Services(
        settings=settings,
        engine=engine,
        db=db,
        auth=auth,
        wakeups=wakeups,
        finishes=finishes,
        listener=listener,
        jobs=job_services,
        queues=QueueServices.build(
            QueuesRepository(db),
            push_targets,
            push_health,
            stats_refresh_seconds=settings.metrics_refresh_seconds,
        ),
        schedules=Schedules(schedules_repo, settings),
        reaper=reaper,
        pruner=pruner,
        vacuumer=vacuumer,
        statistics=statistics,
        scheduler=scheduler,
        dispatcher=dispatcher,
        push_health=push_health,
        events=EventStreams(
            events_repo,
            bell,
            poll_seconds=settings.event_poll_seconds,
            heartbeat_seconds=settings.event_heartbeat_seconds,
            page_size=settings.event_page_size,
            stream_seconds=settings.event_stream_seconds,
        ),
        stamper=stamper,
        events_pruner=events_pruner,
        subscriptions=Subscriptions(subscriptions_repo, allowlist, breakers),
        event_dispatcher=event_dispatcher,
        audit=AuditLog(audit_repo),
        audit_pruner=audit_pruner,
        presence=presence,
        workers=Workers(
            workers_repo,
            presence,
            gone_seconds=settings.worker_gone_seconds,
            retain_seconds=settings.worker_retain_seconds,
        ),
        workers_pruner=workers_pruner,
        background=(
            Step("process metrics", stop=process_exited),
            Step("closing the database pool", stop=engine.dispose),
            # AuthRequired: no key, and not on loopback (the pool is closed again)
            Step("authentication", start=partial(auth.start, settings.host)),
            Task("listener", listener.run),
            Task("pool gauge", partial(metrics.sample_pool_every, engine)),
            Step("enqueue limits", start=record_limits),
            Task("event stamper", stamper.run),
            Step("event subscriptions' client", stop=event_dispatcher.close),
            Task("event subscriptions", event_dispatcher.run),
            Step("workers' presence, its last flush", stop=presence.last_flush),
            Task("workers' presence", presence.run),
            *loops,
            dispatcher,  # stopped before the pool closes: it gives back unfinished leases
            Step("long polls", stop=close_waiters),  # stopped first: their requests end
        ),
        background_reaper=reaper if run_maintenance else None,
    )


def services(request: Request) -> Services:
    """The app's services, which its lifespan built (not a FastAPI dependency: see
    `app.jobs.routes.deps`)."""
    built: Services = request.app.state.services
    return built
