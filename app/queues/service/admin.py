"""What an operator does to a whole queue: redrive its failed jobs, pause and resume it,
purge its queued jobs. Each is one statement per batch, racing no worker."""

from __future__ import annotations

from datetime import datetime

from app.core.errors import ConfirmationMismatch
from app.queues.repository import QueuesRepository
from app.queues.rows import QueueState

DEFAULT_PURGE_BATCH_SIZE = 5000  # queued jobs deleted per statement (and transaction)


class QueueAdmin:
    """Operator actions on whole queues."""

    def __init__(
        self, repo: QueuesRepository, *, purge_batch_size: int = DEFAULT_PURGE_BATCH_SIZE
    ) -> None:
        self._repo = repo
        self.purge_batch_size = purge_batch_size

    async def redrive(
        self,
        queue: str,
        *,
        type_: str | None = None,
        error_type: str | None = None,
        failed_since: datetime | None = None,
        limit: int,
        reset_attempts: bool = False,
    ) -> int:
        """Send up to `limit` failed jobs of `queue` back to it; how many moved."""
        return await self._repo.redrive(
            queue,
            type_=type_,
            error_type=error_type,
            failed_since=failed_since,
            limit=limit,
            reset_attempts=reset_attempts,
        )

    async def pause(self, queue: str) -> QueueState:
        """Stop leasing from `queue`; enqueueing still works."""
        return await self._repo.pause(queue)

    async def resume(self, queue: str) -> QueueState:
        """Lease from `queue` again, waking the lease requests waiting on it."""
        return await self._repo.resume(queue)

    async def purge(self, queue: str, confirm: str) -> int:
        """Delete the queued jobs of `queue`, a batch per transaction; how many went.

        Only jobs that existed when the purge began are deleted: producers that keep
        enqueueing cannot make it run forever.
        """
        if confirm != queue:
            raise ConfirmationMismatch.field(
                ("confirm",), f"must be the queue's name, {queue!r}", "value_error"
            )
        deleted, up_to = 0, None
        while True:
            count, up_to = await self._repo.purge_queued(
                queue, batch_size=self.purge_batch_size, up_to=up_to
            )
            deleted += count
            if count < self.purge_batch_size or up_to is None:
                return deleted
