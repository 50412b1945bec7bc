"""Events as the stream sends them: Server-Sent Events frames (`id`, `event`, `data`)."""

from __future__ import annotations

from typing import Any

from app.api.problems import from_error
from app.core.errors import JobqError
from app.delivery import fingerprint
from app.events.rows import EventRow
from app.events.schemas import EventOut
from app.events.subscriptions import Subscription

RETRY_MILLISECONDS = 2000  # what a browser's EventSource waits before reconnecting


def event(row: EventRow) -> EventOut:
    """`EventOut`."""
    return EventOut(
        id=row.position,
        kind=row.kind,  # the database checks it: an EventKind
        at=row.at,
        queue=row.queue,
        job_id=row.job_id,
        type=row.type,
        attempt=row.attempt,
    )


def frame(row: EventRow) -> bytes:
    """One event: its position as the SSE id, its kind as the SSE event type."""
    data = event(row).model_dump_json()
    return f"id: {row.position}\nevent: {row.kind}\ndata: {data}\n\n".encode()


def opening() -> bytes:
    """The stream's first bytes: the reconnection delay, and a comment that makes
    proxies pass the headers on at once."""
    return f"retry: {RETRY_MILLISECONDS}\n: jobq events\n\n".encode()


def heartbeat(position: int) -> bytes:
    """A comment that keeps proxies from closing an idle stream, and the position read
    up to (events filtered out included): a reconnecting client resumes from there. A
    frame with an id and no data dispatches no event, but sets the last event id."""
    return f": keepalive\nid: {position}\n\n".encode()


def failure(error: JobqError) -> bytes:
    """The stream's last frame when it cannot go on: an `error` event whose data is the
    problem an HTTP answer would carry."""
    return b"event: error\ndata: " + bytes(from_error(error).body) + b"\n\n"


def subscription(found: Subscription) -> dict[str, Any]:
    """`SubscriptionOut`."""
    row, breaker = found.row, found.breaker
    return {
        "name": row.name,
        "url": row.url,
        "queues": row.queues,
        "types": row.types,
        "kinds": row.kinds,
        "paused": row.paused,
        "secret_fingerprints": [fingerprint(s) for s in row.secrets],
        "secret": found.new_secret,
        "position": row.position,
        "attempts": row.attempts,
        "next_attempt_at": row.next_attempt_at,
        "last_status": row.last_status,
        "last_error": row.last_error,
        "delivered_at": row.delivered_at,
        "missed": row.missed,
        "breaker": {
            "state": breaker.state,
            "failures": breaker.failures,
            "open_until": breaker.open_until,
            "last_error": breaker.last_error,
        },
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }
