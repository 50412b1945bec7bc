"""Per-queue settings an operator changes at run time: the maximum backlog, the limits on
running jobs and lease rate, and the policy that overrides the service's defaults.

A queue needs no creating; it has a settings row only once someone configured it, and
a queue without one has the defaults (no limit, the service's policy). The statements
read the row themselves: a change applies to the next enqueue, lease or retry on every
replica (each also drops its cached set of limited queues: `NOTIFY jobq_settings`).
"""

from __future__ import annotations

from app.queues.params import SetQueueSettingsParams
from app.queues.repository import QueuesRepository
from app.queues.rows import QueueSettingsRow
from app.queues.schemas import QueueSettingsIn

# the row's columns that `QueueSettingsIn` names alike (rate_limit is two columns)
_PLAIN = [name for name in QueueSettingsIn.model_fields if name != "rate_limit"]


def _params(queue: str, change: QueueSettingsIn) -> SetQueueSettingsParams:
    """The settings `change` names; None for the others (their columns are kept)."""
    given = change.model_fields_set
    values = {name: getattr(change, name) if name in given else None for name in _PLAIN}
    rate = change.rate_limit if "rate_limit" in given else None
    return SetQueueSettingsParams(
        queue=queue,
        rate_limit_jobs=rate.jobs if rate is not None else None,
        rate_limit_seconds=rate.per_seconds if rate is not None else None,
        given=sorted(given),
        **values,
    )


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

    async def change(self, queue: str, change: QueueSettingsIn) -> QueueSettingsRow:
        """Change the settings `change` names (to null: cleared); the rest stay."""
        return await self._repo.set_settings(_params(queue, change))
