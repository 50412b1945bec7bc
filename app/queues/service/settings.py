"""Per-queue settings an operator changes at run time: the maximum backlog, the limits on
running jobs and lease rate, and the policy that overrides the service's defaults.

A queue needs no creating; it has a settings row only once someone configured it, and
a queue without one has the defaults (no limit, the service's policy). The statements
read the row themselves: a change applies to the next enqueue, lease or retry on every
replica (each also drops its cached set of limited queues: `NOTIFY jobq_settings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.queues.params import SetQueueSettingsParams
from app.queues.repository import QueuesRepository
from app.queues.rows import QueueSettingsRow

# A change of settings: the columns of `QueueSettingsRow` it names, each with its new
# value (None clears it: no limit, or the service's default).
SettingsChange = Mapping[str, float | None]
_COLUMNS = QueueSettingsRow._fields[1:]  # a row's settings, after the queue's name


def _params(queue: str, change: SettingsChange) -> SetQueueSettingsParams:
    """The settings `change` names; None for the others (their columns are kept). The
    rate limit's two columns are given as one, `rate_limit`."""
    given = {"rate_limit" if name.startswith("rate_limit_") else name for name in change}
    values: dict[str, Any] = {name: change.get(name) for name in _COLUMNS}
    return SetQueueSettingsParams(queue=queue, **values, given=sorted(given))


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
        return await self._repo.set_settings(_params(queue, change))
