"""The subscriptions' dispatcher: sends each subscription its events, in position order,
at least once, in every replica.

A pass leases the subscription due the longest that has events after its cursor (one
dispatcher per subscription at a time: the lease, `lease_seconds`, is taken over by
another replica once it expires, so a replica that dies mid-send only delays it), reads
the next events its filters let through, and POSTs up to `batch_size` of them as one
signed request (Standard Webhooks, the subscription's secrets; `webhook-id`
`<name>-<first>-<last>`). A 2xx moves the cursor past them; anything else leaves it
and retries the same events later (the answer's `Retry-After`, else a backoff doubling
from `backoff_base_seconds` to `backoff_cap_seconds`), so the events of one job always
arrive in order, and a batch may arrive twice (receivers drop an event id they have).
The target's breaker (`subscription:<name>`) holds deliveries back while open. Events
past retention that a subscription never received are skipped: its cursor moves to
the oldest kept and its `missed` counts them (the outbox's pruning waits for no
subscription, so one that is down for days leaves a gap, not an outbox that grows).

    dispatcher.run_once()   # serve every subscription due now; how many requests it sent
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import httpx

from app.core.errors import DatabaseUnavailable
from app.delivery import Allowlist, Attempt, Breakers, Secrets, send, sign
from app.events.bell import EventBell
from app.events.params import (
    AdvanceSubscriptionParams,
    ClaimSubscriptionParams,
    EventsBetweenParams,
    RetrySubscriptionParams,
    SkipExpiredParams,
)
from app.events.repository import EventsRepository, SubscriptionsRepository
from app.events.rows import EventRow, SubscriptionRow
from app.events.subscriptions import breaker_key
from app.events.views import event

log = logging.getLogger("jobq.subscriptions")


class Dispatcher:
    """Delivers the subscriptions' events; `run` loops, woken by the bell."""

    def __init__(
        self,
        repo: SubscriptionsRepository,
        events: EventsRepository,
        allowlist: Allowlist,
        breakers: Breakers,
        transport: Callable[[], httpx.AsyncBaseTransport],
        bell: EventBell,
        *,
        interval_seconds: float,
        batch_size: int,
        window: int,
        timeout_seconds: float,
        backoff_base_seconds: float,
        backoff_cap_seconds: float,
    ) -> None:
        self._repo = repo
        self._events = events
        self._allowlist = allowlist
        self._breakers = breakers
        self._transport_factory = transport
        self._transport: httpx.AsyncBaseTransport | None = None
        self._bell = bell
        self.interval_seconds = interval_seconds
        self.batch_size = batch_size
        self.window = window
        self.timeout_seconds = timeout_seconds
        self.backoff_base_seconds = backoff_base_seconds
        self.backoff_cap_seconds = backoff_cap_seconds

    async def run_once(self) -> int:
        """Serve the subscriptions due now, one at a time; the requests sent."""
        sent = 0
        while True:
            lease_id = uuid.uuid4()
            claimed = await self._repo.claim(
                ClaimSubscriptionParams(lease_id, self.timeout_seconds * 2 + 5)
            )
            if claimed is None:
                return sent
            sent += await self._serve(claimed, lease_id)

    async def run(self) -> None:
        """Serve until cancelled: after each stamp (the bell), else every interval."""
        while True:
            try:
                await self.run_once()
            except DatabaseUnavailable:
                log.warning("subscriptions: database unavailable, will retry")
            except Exception:
                log.exception("subscriptions: pass failed")
            if self._bell.closed:
                return
            await self._bell.wait(self.interval_seconds)

    async def close(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()

    async def _serve(self, sub: SubscriptionRow, lease_id: uuid.UUID) -> int:
        key = breaker_key(sub.name)
        breaker = (await self._breakers.states([key]))[key]
        if breaker.open and breaker.open_until is not None:
            wait = (breaker.open_until - datetime.now(UTC)).total_seconds()
            await self._retry(sub, lease_id, max(wait, 0.0), None, None)
            return 0
        first, last = await self._events.bounds()
        after = sub.position
        if first is not None and after < first - 1:
            # pruned before it got them (retention waits for no subscription): the gap is
            # counted on the subscription, whatever becomes of the next batch
            after = first - 1
            missed = await self._repo.skip_expired(SkipExpiredParams(sub.name, lease_id, after))
            if missed is None:
                return 0  # the lease went to another dispatcher
            log.warning(
                "subscription %s: %d events expired unsent (%d in all)",
                sub.name,
                after - sub.position,
                missed,
            )
        up_to = min(after + self.window, last or 0)
        rows = await self._events.between(
            EventsBetweenParams(after, up_to, None, None, sub.queues, sub.types, sub.kinds)
        )
        batch = rows[: self.batch_size]
        if len(rows) > self.batch_size:
            up_to = batch[-1].position
        if not batch:
            await self._advance(sub, lease_id, up_to, None)
            return 0
        attempt = await self._send(sub, batch)
        error = f"{attempt.status_class}: {attempt.excerpt()}"
        await self._breakers.record(key, attempt.ok, error=error)
        if attempt.ok:
            await self._advance(sub, lease_id, up_to, attempt.status)
        else:
            delay = attempt.retry_after() if attempt.status in (429, 503) else None
            if delay is None:
                delay = min(self.backoff_base_seconds * 2.0**sub.attempts, self.backoff_cap_seconds)
            await self._retry(sub, lease_id, delay, attempt.status, error)
        return 1

    async def _send(self, sub: SubscriptionRow, batch: list[EventRow]) -> Attempt:
        body = json.dumps(
            {
                "type": "jobq.events",
                "subscription": sub.name,
                "events": [event(row).model_dump(mode="json") for row in batch],
            },
            separators=(",", ":"),
        )
        message_id = f"{sub.name}-{batch[0].position}-{batch[-1].position}"
        headers = sign(Secrets.parse(sub.secrets), message_id, body)
        if self._transport is None:
            self._transport = self._transport_factory()
        return await send(
            self._transport,
            self._allowlist,
            sub.url,
            body.encode(),
            headers,
            timeout_seconds=self.timeout_seconds,
        )

    async def _advance(
        self, sub: SubscriptionRow, lease_id: uuid.UUID, position: int, status: int | None
    ) -> None:
        await self._repo.advance(AdvanceSubscriptionParams(sub.name, lease_id, position, status))

    async def _retry(
        self,
        sub: SubscriptionRow,
        lease_id: uuid.UUID,
        delay: float,
        status: int | None,
        error: str | None,
    ) -> None:
        attempted = error is not None
        await self._repo.retry(
            RetrySubscriptionParams(sub.name, lease_id, delay, attempted, status, error)
        )
