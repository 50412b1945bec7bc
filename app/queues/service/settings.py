"""Per-queue settings an operator changes at run time: for now, the maximum backlog.

A queue needs no creating; it has a settings row only once someone configured it, and
a queue without one has the defaults (no maximum backlog). The enqueue statements read
the row themselves, so a change applies to the next enqueue on every replica.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.queues.repository import QueuesRepository


@dataclass(frozen=True, slots=True)
class QueueSettings:
    queue: str
    max_backlog: int | None


class QueueSettingsService:
    """Read and change a queue's settings."""

    def __init__(self, repo: QueuesRepository) -> None:
        self._repo = repo

    async def get(self, queue: str) -> QueueSettings:
        """The queue's settings; the defaults if nobody configured it."""
        row = await self._repo.get_settings(queue)
        return QueueSettings(queue, row.max_backlog if row is not None else None)

    async def set_max_backlog(self, queue: str, max_backlog: int | None) -> QueueSettings:
        """Limit the queue's unfinished jobs to `max_backlog`; None lifts the limit."""
        row = await self._repo.set_max_backlog(queue, max_backlog)
        return QueueSettings(row.name, row.max_backlog)
