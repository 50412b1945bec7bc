"""The operator calls of `Client` and `AsyncClient`: acting on one job, on queues and their
settings, on schedules; each written once in `_admin_calls` and sent by the client's
own `_call`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any, TypeVar

from jobq_client import _admin_calls, _calls
from jobq_client._admin import (
    AuditEntry,
    AuditPage,
    CatchUp,
    PushHealth,
    QueueSettings,
    QueueStats,
    Schedule,
    Stats,
    WorkerInfo,
)
from jobq_client._calls import Call
from jobq_client._models import Dependencies, Explanation, JobRecord

T = TypeVar("T")
_SETTINGS = {f.name for f in fields(QueueSettings)} - {"queue"}


def _settings(changes: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(changes) - _SETTINGS)
    if unknown:
        raise TypeError(f"not a queue setting: {', '.join(unknown)}")
    return changes


def _redrive_body(
    type: str | None,
    error_type: str | None,
    failed_since: datetime | None,
    limit: int,
    reset_attempts: bool,
) -> dict[str, Any]:
    body: dict[str, Any] = {"limit": limit, "reset_attempts": reset_attempts}
    if type is not None:
        body["type"] = type
    if error_type is not None:
        body["error_type"] = error_type
    if failed_since is not None:
        body["failed_since"] = failed_since.isoformat()
    return body


def _subscription_body(
    url: str,
    queues: Sequence[str] | None,
    types: Sequence[str] | None,
    kinds: Sequence[str] | None,
    secrets: Sequence[str] | None,
    paused: bool,
) -> dict[str, Any]:
    def listed(values: Sequence[str] | None) -> list[str] | None:
        return None if values is None else list(values)

    return {
        "url": url,
        "queues": listed(queues),
        "types": listed(types),
        "kinds": listed(kinds),
        "secrets": listed(secrets),
        "paused": paused,
    }


class Operations:
    """`Client`'s operator calls."""

    def _call(self, call: Call[T]) -> T:
        raise NotImplementedError

    def explain_job(self, job_id: int) -> Explanation:
        """Why job `job_id` is not running now: every reason that holds, or how it ended."""
        return self._call(_calls.explain_job(job_id))

    def get_dependencies(self, job_id: int) -> Dependencies:
        """The jobs `job_id` waits for, and those waiting for it."""
        return self._call(_calls.get_dependencies(job_id))

    def retry_job(
        self, job_id: int, run_at: datetime | None = None, *, reset_attempts: bool = False
    ) -> JobRecord:
        """Send a failed or cancelled job back to its queue (due at `run_at`, default now);
        with `reset_attempts`, with all its attempts again."""
        return self._call(_admin_calls.retry_job(job_id, run_at, reset_attempts))

    def delete_job(self, job_id: int) -> None:
        """Delete a job that is not running."""
        self._call(_admin_calls.delete_job(job_id))

    def pause_queue(self, queue: str) -> None:
        """Stop leasing from `queue` (enqueueing goes on)."""
        self._call(_admin_calls.queue_action(queue, "pause"))

    def resume_queue(self, queue: str) -> None:
        """Lease from a paused queue again."""
        self._call(_admin_calls.queue_action(queue, "resume"))

    def purge_queue(self, queue: str) -> int:
        """Delete every queued job of `queue`; how many went."""
        answer = self._call(_admin_calls.queue_action(queue, "purge", {"confirm": queue}))
        return int(answer["deleted"])

    def get_push_health(self, queue: str) -> PushHealth:
        """A pushed queue's target and circuit breaker (NotFound: the queue is pulled)."""
        return self._call(_admin_calls.get_push_health(queue))

    def reset_push(self, queue: str) -> PushHealth:
        """Close a pushed queue's circuit breaker (admin scope): deliveries resume at once."""
        return self._call(_admin_calls.reset_push(queue))

    def get_queue(self, queue: str) -> QueueStats:
        """One queue's figures and the use of its limits."""
        return self._call(_admin_calls.get_queue(queue))

    def list_queues(self) -> list[QueueStats]:
        """Every known queue's figures."""
        return self._call(_admin_calls.list_queues())

    def get_stats(self) -> Stats:
        """Every known queue's figures and the database's health, from one answer."""
        return self._call(_admin_calls.get_stats())

    def get_queue_settings(self, queue: str) -> QueueSettings:
        """A queue's settings (None: no limit, the service's default)."""
        return self._call(_admin_calls.get_queue_settings(queue))

    def list_audit(
        self,
        *,
        key: str | None = None,
        action: str | None = None,
        queue: str | None = None,
        since: datetime | None = None,
        before: int | None = None,
        limit: int | None = None,
    ) -> AuditPage:
        """One page of the audit log, newest first (`admin` key); pass `next_before` as
        `before` for the next, older page."""
        return self._call(
            _admin_calls.audit_page(
                key=key, action=action, queue=queue, since=since, before=before, limit=limit
            )
        )

    def iter_audit(
        self,
        *,
        key: str | None = None,
        action: str | None = None,
        queue: str | None = None,
        since: datetime | None = None,
        before: int | None = None,
        page_size: int = 100,
    ) -> Iterator[AuditEntry]:
        """Every matching audit entry (older than entry `before`), newest first, fetching
        page after page."""
        while True:
            page = self.list_audit(
                key=key, action=action, queue=queue, since=since, before=before, limit=page_size
            )
            yield from page.entries
            if page.next_before is None:
                return
            before = page.next_before

    def list_workers(self) -> list[WorkerInfo]:
        """Every worker seen lately, idle or busy, live or gone (page after page)."""
        found: list[WorkerInfo] = []
        after: str | None = None
        while True:
            page, after = self._call(_admin_calls.workers_page(after))
            found += page
            if after is None:
                return found

    def quiet_worker(self, worker_id: str) -> bool:
        """Ask a worker to lease no more (it finishes the jobs it holds); True."""
        return self._call(_admin_calls.switch_worker(worker_id, "quiet"))

    def resume_worker(self, worker_id: str) -> bool:
        """Let a quiet worker lease again; False (it is no longer quiet)."""
        return self._call(_admin_calls.switch_worker(worker_id, "resume"))

    def get_schedule(self, name: str) -> Schedule:
        """A schedule, its next ticks and the last jobs it made."""
        return self._call(_admin_calls.get_schedule(name))

    def list_schedules(self) -> list[Schedule]:
        """Every schedule (page after page)."""
        found: list[Schedule] = []
        after: str | None = ""
        while after is not None:
            page, after = self._call(_admin_calls.schedules_page(after))
            found += page
        return found

    def delete_schedule(self, name: str) -> None:
        """Delete a schedule (the jobs it made stay)."""
        self._call(_admin_calls.delete_schedule(name))

    def pause_schedule(self, name: str) -> Schedule:
        """Stop a schedule's ticks."""
        return self._call(_admin_calls.switch_schedule(name, "pause"))

    def resume_schedule(self, name: str) -> Schedule:
        """Restart a schedule from its next tick after now."""
        return self._call(_admin_calls.switch_schedule(name, "resume"))

    def redrive_failed(
        self,
        queue: str,
        *,
        type: str | None = None,
        error_type: str | None = None,
        failed_since: datetime | None = None,
        limit: int = 1000,
        reset_attempts: bool = False,
    ) -> int:
        """Send up to `limit` failed jobs of `queue` back, filtered; how many went."""
        body = _redrive_body(type, error_type, failed_since, limit, reset_attempts)
        answer = self._call(_admin_calls.queue_action(queue, "failed/retry", body))
        return int(answer["retried"])

    def set_queue_settings(self, queue: str, **changes: Any) -> QueueSettings:
        """Change the settings named (`max_running=5`, `rate_limit=RateLimit(100, 60)`,
        `max_backlog=None` to clear one); the others stay."""
        return self._call(_admin_calls.set_queue_settings(queue, _settings(changes)))

    def set_schedule(
        self,
        name: str,
        *,
        queue: str,
        type: str,
        cron: str,
        payload: Any = None,
        timezone: str = "UTC",
        priority: int = 0,
        max_attempts: int | None = None,
        lease_seconds: int | None = None,
        metadata: dict[str, Any] | None = None,
        paused: bool = False,
        catch_up: CatchUp = "latest",
        catch_up_limit: int = 100,
    ) -> Schedule:
        """Create or replace the schedule `name`: a `type` job on `queue` at each tick of
        `cron` (5 fields or @hourly, @daily…) in `timezone`."""
        return self._call(
            _admin_calls.set_schedule(
                name, queue=queue, type=type, cron=cron, payload=payload, timezone=timezone,
                priority=priority, max_attempts=max_attempts, lease_seconds=lease_seconds,
                metadata=metadata, paused=paused, catch_up=catch_up,
                catch_up_limit=catch_up_limit,
            )
        )  # fmt: skip

    def set_subscription(
        self,
        name: str,
        url: str,
        *,
        queues: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
        secrets: Sequence[str] | None = None,
        paused: bool = False,
    ) -> dict[str, Any]:
        """Create or replace the event subscription `name`: `url` receives the events of
        `queues`, `types` and `kinds` (None: all). The answer's `secret` is the one made
        for a new subscription without `secrets`, shown this once."""
        body = _subscription_body(url, queues, types, kinds, secrets, paused)
        return self._call(_admin_calls.set_subscription(name, body))

    def get_subscription(self, name: str) -> dict[str, Any]:
        """An event subscription: its cursor, last delivery and breaker."""
        return self._call(_admin_calls.get_subscription(name))

    def list_subscriptions(self) -> list[dict[str, Any]]:
        """Every event subscription."""
        return self._call(_admin_calls.list_subscriptions())

    def delete_subscription(self, name: str) -> None:
        """Delete an event subscription."""
        self._call(_admin_calls.delete_subscription(name))

    def reset_subscription(self, name: str) -> dict[str, Any]:
        """Close an event subscription's breaker."""
        return self._call(_admin_calls.reset_subscription(name))


class AsyncOperations:
    """`AsyncClient`'s operator calls."""

    async def _call(self, call: Call[T]) -> T:
        raise NotImplementedError

    async def explain_job(self, job_id: int) -> Explanation:
        """Why job `job_id` is not running now: every reason that holds, or how it ended."""
        return await self._call(_calls.explain_job(job_id))

    async def get_dependencies(self, job_id: int) -> Dependencies:
        """The jobs `job_id` waits for, and those waiting for it."""
        return await self._call(_calls.get_dependencies(job_id))

    async def retry_job(
        self, job_id: int, run_at: datetime | None = None, *, reset_attempts: bool = False
    ) -> JobRecord:
        """Send a failed or cancelled job back to its queue (due at `run_at`, default now);
        with `reset_attempts`, with all its attempts again."""
        return await self._call(_admin_calls.retry_job(job_id, run_at, reset_attempts))

    async def delete_job(self, job_id: int) -> None:
        """Delete a job that is not running."""
        await self._call(_admin_calls.delete_job(job_id))

    async def pause_queue(self, queue: str) -> None:
        """Stop leasing from `queue` (enqueueing goes on)."""
        await self._call(_admin_calls.queue_action(queue, "pause"))

    async def resume_queue(self, queue: str) -> None:
        """Lease from a paused queue again."""
        await self._call(_admin_calls.queue_action(queue, "resume"))

    async def purge_queue(self, queue: str) -> int:
        """Delete every queued job of `queue`; how many went."""
        answer = await self._call(_admin_calls.queue_action(queue, "purge", {"confirm": queue}))
        return int(answer["deleted"])

    async def get_push_health(self, queue: str) -> PushHealth:
        """A pushed queue's target and circuit breaker (NotFound: the queue is pulled)."""
        return await self._call(_admin_calls.get_push_health(queue))

    async def reset_push(self, queue: str) -> PushHealth:
        """Close a pushed queue's circuit breaker (admin scope): deliveries resume at once."""
        return await self._call(_admin_calls.reset_push(queue))

    async def get_queue(self, queue: str) -> QueueStats:
        """One queue's figures and the use of its limits."""
        return await self._call(_admin_calls.get_queue(queue))

    async def list_queues(self) -> list[QueueStats]:
        """Every known queue's figures."""
        return await self._call(_admin_calls.list_queues())

    async def get_stats(self) -> Stats:
        """Every known queue's figures and the database's health, from one answer."""
        return await self._call(_admin_calls.get_stats())

    async def get_queue_settings(self, queue: str) -> QueueSettings:
        """A queue's settings (None: no limit, the service's default)."""
        return await self._call(_admin_calls.get_queue_settings(queue))

    async def list_audit(
        self,
        *,
        key: str | None = None,
        action: str | None = None,
        queue: str | None = None,
        since: datetime | None = None,
        before: int | None = None,
        limit: int | None = None,
    ) -> AuditPage:
        """One page of the audit log, newest first (`admin` key); pass `next_before` as
        `before` for the next, older page."""
        return await self._call(
            _admin_calls.audit_page(
                key=key, action=action, queue=queue, since=since, before=before, limit=limit
            )
        )

    async def iter_audit(
        self,
        *,
        key: str | None = None,
        action: str | None = None,
        queue: str | None = None,
        since: datetime | None = None,
        before: int | None = None,
        page_size: int = 100,
    ) -> AsyncIterator[AuditEntry]:
        """Every matching audit entry (older than entry `before`), newest first, fetching
        page after page."""
        while True:
            page = await self.list_audit(
                key=key, action=action, queue=queue, since=since, before=before, limit=page_size
            )
            for entry in page.entries:
                yield entry
            if page.next_before is None:
                return
            before = page.next_before

    async def list_workers(self) -> list[WorkerInfo]:
        """Every worker seen lately, idle or busy, live or gone (page after page)."""
        found: list[WorkerInfo] = []
        after: str | None = None
        while True:
            page, after = await self._call(_admin_calls.workers_page(after))
            found += page
            if after is None:
                return found

    async def quiet_worker(self, worker_id: str) -> bool:
        """Ask a worker to lease no more (it finishes the jobs it holds); True."""
        return await self._call(_admin_calls.switch_worker(worker_id, "quiet"))

    async def resume_worker(self, worker_id: str) -> bool:
        """Let a quiet worker lease again; False (it is no longer quiet)."""
        return await self._call(_admin_calls.switch_worker(worker_id, "resume"))

    async def get_schedule(self, name: str) -> Schedule:
        """A schedule, its next ticks and the last jobs it made."""
        return await self._call(_admin_calls.get_schedule(name))

    async def list_schedules(self) -> list[Schedule]:
        """Every schedule (page after page)."""
        found: list[Schedule] = []
        after: str | None = ""
        while after is not None:
            page, after = await self._call(_admin_calls.schedules_page(after))
            found += page
        return found

    async def delete_schedule(self, name: str) -> None:
        """Delete a schedule (the jobs it made stay)."""
        await self._call(_admin_calls.delete_schedule(name))

    async def pause_schedule(self, name: str) -> Schedule:
        """Stop a schedule's ticks."""
        return await self._call(_admin_calls.switch_schedule(name, "pause"))

    async def resume_schedule(self, name: str) -> Schedule:
        """Restart a schedule from its next tick after now."""
        return await self._call(_admin_calls.switch_schedule(name, "resume"))

    async def redrive_failed(
        self,
        queue: str,
        *,
        type: str | None = None,
        error_type: str | None = None,
        failed_since: datetime | None = None,
        limit: int = 1000,
        reset_attempts: bool = False,
    ) -> int:
        """Send up to `limit` failed jobs of `queue` back, filtered; how many went."""
        body = _redrive_body(type, error_type, failed_since, limit, reset_attempts)
        answer = await self._call(_admin_calls.queue_action(queue, "failed/retry", body))
        return int(answer["retried"])

    async def set_queue_settings(self, queue: str, **changes: Any) -> QueueSettings:
        """Change the settings named (`max_running=5`, `rate_limit=RateLimit(100, 60)`,
        `max_backlog=None` to clear one); the others stay."""
        return await self._call(_admin_calls.set_queue_settings(queue, _settings(changes)))

    async def set_schedule(
        self,
        name: str,
        *,
        queue: str,
        type: str,
        cron: str,
        payload: Any = None,
        timezone: str = "UTC",
        priority: int = 0,
        max_attempts: int | None = None,
        lease_seconds: int | None = None,
        metadata: dict[str, Any] | None = None,
        paused: bool = False,
        catch_up: CatchUp = "latest",
        catch_up_limit: int = 100,
    ) -> Schedule:
        """Create or replace the schedule `name`: a `type` job on `queue` at each tick of
        `cron` (5 fields or @hourly, @daily…) in `timezone`."""
        return await self._call(
            _admin_calls.set_schedule(
                name, queue=queue, type=type, cron=cron, payload=payload, timezone=timezone,
                priority=priority, max_attempts=max_attempts, lease_seconds=lease_seconds,
                metadata=metadata, paused=paused, catch_up=catch_up,
                catch_up_limit=catch_up_limit,
            )
        )  # fmt: skip

    async def set_subscription(
        self,
        name: str,
        url: str,
        *,
        queues: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
        secrets: Sequence[str] | None = None,
        paused: bool = False,
    ) -> dict[str, Any]:
        """Create or replace the event subscription `name`: `url` receives the events of
        `queues`, `types` and `kinds` (None: all). The answer's `secret` is the one made
        for a new subscription without `secrets`, shown this once."""
        body = _subscription_body(url, queues, types, kinds, secrets, paused)
        return await self._call(_admin_calls.set_subscription(name, body))

    async def get_subscription(self, name: str) -> dict[str, Any]:
        """An event subscription: its cursor, last delivery and breaker."""
        return await self._call(_admin_calls.get_subscription(name))

    async def list_subscriptions(self) -> list[dict[str, Any]]:
        """Every event subscription."""
        return await self._call(_admin_calls.list_subscriptions())

    async def delete_subscription(self, name: str) -> None:
        """Delete an event subscription."""
        await self._call(_admin_calls.delete_subscription(name))

    async def reset_subscription(self, name: str) -> dict[str, Any]:
        """Close an event subscription's breaker."""
        return await self._call(_admin_calls.reset_subscription(name))
