"""The event stream's rules: where a reader starts (now, or after the position it last
had, if that is still kept), which events it may see (its key's queues, its filters),
and following new ones as they are stamped, with a heartbeat while none come.

A stream holds no database connection between reads: each read takes one from the
pool (so it works through a transaction-mode pooler), and between reads it waits on
the bell, at most `poll_seconds`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from app.core.errors import EventsExpired
from app.events.bell import EventBell
from app.events.params import EventsBetweenParams
from app.events.repository import EventsRepository
from app.events.rows import EventRow


@dataclass(frozen=True, slots=True)
class EventFilter:
    """What a reader asked for (None: all) within what its key may read (`allowed`:
    queue names and LIKE patterns; None: every queue)."""

    allowed: tuple[list[str], list[str]] | None = None
    queues: list[str] | None = None
    types: list[str] | None = None
    kinds: list[str] | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Nothing new: the position the reader has read up to (filtered events included)."""

    position: int


@dataclass(frozen=True, slots=True)
class Expired:
    """The reader fell behind retention while it read; the stream ends."""

    error: EventsExpired


class EventStreams:
    """Starts and follows event streams."""

    def __init__(
        self,
        repo: EventsRepository,
        bell: EventBell,
        *,
        poll_seconds: float,
        heartbeat_seconds: float,
        page_size: int,
        stream_seconds: float,
    ) -> None:
        self._repo = repo
        self.bell = bell
        self.poll_seconds = poll_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.page_size = page_size
        self.stream_seconds = stream_seconds

    async def start(self, after: int | None) -> int:
        """The position to follow from: the last event now, or `after` when the events
        after it are all still kept (`EventsExpired` otherwise)."""
        first, last = await self._repo.bounds()
        if after is None:
            return last or 0
        if after > (last or 0):
            raise EventsExpired(f"no event has position {after}: this is another jobq")
        if first is not None and after < first - 1:
            raise EventsExpired(
                f"the events after {after} are no longer kept (the oldest kept is {first})"
            )
        return after

    async def follow(
        self, position: int, events: EventFilter
    ) -> AsyncIterator[EventRow | Heartbeat | Expired]:
        """The events after `position`, in order, as they come, until the bell closes or
        the stream has lasted `stream_seconds`; it ends with a heartbeat (the position
        to resume from)."""
        started = time.monotonic()
        ends_at = started + self.stream_seconds
        beat_at = started + self.heartbeat_seconds
        while not self.bell.closed:
            first, last = await self._repo.bounds()
            if first is not None and position < first - 1:
                yield Expired(EventsExpired(f"the events after {position} were pruned"))
                return
            while last is not None and position < last:
                up_to = min(position + self.page_size, last)
                rows = await self._repo.between(
                    EventsBetweenParams(
                        after=position,
                        up_to=up_to,
                        allowed_names=events.allowed[0] if events.allowed else None,
                        allowed_patterns=events.allowed[1] if events.allowed else None,
                        queues=events.queues,
                        types=events.types,
                        kinds=events.kinds,
                    )
                )
                for row in rows:
                    yield row
                position = up_to
                if rows:
                    beat_at = time.monotonic() + self.heartbeat_seconds
            now = time.monotonic()
            if now >= ends_at:
                yield Heartbeat(position)
                return
            if now >= beat_at:
                yield Heartbeat(position)
                beat_at = now + self.heartbeat_seconds
            await self.bell.wait(min(self.poll_seconds, max(min(beat_at, ends_at) - now, 0.0)))
