"""Per-queue settings an operator changes at run time: the maximum backlog, the limits on
running jobs and lease rate, and the policy that overrides the service's defaults.

A queue needs no creating; it has a settings row only once someone configured it, and
a queue without one has the defaults (no limit, the service's policy). The statements
read the row themselves: a change applies to the next enqueue, lease or retry on every
replica (each also drops its cached set of limited queues: `NOTIFY jobq_settings`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.queues.params import SetQueueSettingsParams
from app.queues.repository import QueuesRepository
from app.queues.rows import QueueSettingsRow

# A change of settings: the columns of `QueueSettingsRow` it names, each with its new
# value (None clears it: no limit, or the service's default).
SettingsChange = Mapping[str, float | str | Mapping[str, float] | None]
_COLUMNS = QueueSettingsRow._fields[1:]  # a row's settings, after the queue's name
# The columns set together, by the setting's name.
_GIVEN_AS = {
    "rate_limit_jobs": "rate_limit",
    "rate_limit_seconds": "rate_limit",
    "rate_limit_per_key_jobs": "rate_limit_per_key",
    "rate_limit_per_key_seconds": "rate_limit_per_key",
    "aging_seconds": "aging",
    "aging_max": "aging",
}


def _params(queue: str, change: SettingsChange) -> SetQueueSettingsParams:
    """The settings `change` names; None for the others (their columns are kept). The
    rate limits' and aging's two columns are given as one (`_GIVEN_AS`); the weights
    go as JSON text."""
    given = {_GIVEN_AS.get(name, name) for name in change}
    values: dict[str, Any] = {name: change.get(name) for name in _COLUMNS}
    if values["fair_weights"] is not None:
        values["fair_weights"] = json.dumps(values["fair_weights"])
    return SetQueueSettingsParams(queue=queue, **values, given=sorted(given))


class QueueSettingsService:
    """Read and change a queue's settings."""

    def __init__(self, repo: QueuesRepository) -> None:
        self._repo = repo

    async def get(self, queue: str) -> QueueSettingsRow:
        """The queue's settings; the defaults if nobody configured it."""
        row = await self._repo.get_settings(queue)
        if row is None:
            unset = QueueSettingsRow._make([queue, *[None] * (len(QueueSettingsRow._fields) - 1)])
            return unset._replace(ordering="fifo")
        return row

    async def change(self, queue: str, change: SettingsChange) -> QueueSettingsRow:
        """Change the settings `change` names (to None: cleared); the rest stay."""
        return await self._repo.set_settings(_params(queue, change))
