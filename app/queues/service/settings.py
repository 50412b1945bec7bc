"""Per-queue settings an operator changes at run time: the maximum backlog, the limits on
running jobs and lease rate, and the policy that overrides the service's defaults.

A queue needs no creating; it has a settings row only once someone configured it, and
a queue without one has the defaults (no limit, the service's policy). The statements
read the row themselves: a change applies to the next enqueue, lease or retry on every
replica (each also drops its cached set of limited queues: `NOTIFY jobq_settings`).
"""

from __future__ import annotations

from collections.abc import Mapping

from app.queues.repository import QueuesRepository
from app.queues.rows import QueueSettingsRow

# A change of settings: the columns of `QueueSettingsRow` it names, each with its new
# value (None clears it: no limit, or the service's default).
SettingsChange = Mapping[str, float | None]


class QueueSettingsService:
    """Read and change a queue's settings."""

    def __init__(self, repo: QueuesRepository) -> None:
        self._repo = repo

    async def get(self, queue: str) -> QueueSettingsRow:
        """The queue's settings; the defaults if nobody configured it."""
        row = await self._repo.get_settings(queue)
        if row is None:
            return QueueSettingsRow(queue, *([None] * (len(QueueSettingsRow._fields) - 1)))
        return row

    async def change(self, queue: str, change: SettingsChange) -> QueueSettingsRow:
        """Change the settings `change` names (to None: cleared); the rest stay."""
        return await self._repo.set_settings(queue, dict(change))
