"""The deliveries' acks, written in batches: each delivery hands its job's outcome (a
complete with the answer's result, or a failed attempt) to `Finisher.finish` and waits
for its answer; the acks handed in while a batch is being written go in the next one, in
one `Acks.finish` call (one round trip, one commit). An idle dispatcher's single
delivery is written at once, as its own batch; a busy one's share the round trips.

    finisher = Finisher(job_services.acks, max_batch=settings.max_ack_batch)
    finished = await finisher.finish(Ack(lease.token, "complete", result))
    finished.error   # None, or why this ack was refused (the lease went, say)
"""

from __future__ import annotations

import asyncio

from app.jobs import Ack, Acks, Finished


class Finisher:
    """Batches the acks of one dispatcher's deliveries."""

    def __init__(self, acks: Acks, *, max_batch: int) -> None:
        self._acks = acks
        self._max_batch = max_batch
        self._waiting: list[tuple[Ack, asyncio.Future[Finished]]] = []
        self._batch: list[tuple[Ack, asyncio.Future[Finished]]] = []  # being written
        self._writing: asyncio.Task[None] | None = None

    async def finish(self, ack: Ack) -> Finished:
        """Write `ack` with the others waiting; its answer. Raises what the batch's
        call raised (`DatabaseUnavailable`, say): none of that batch was written."""
        answer: asyncio.Future[Finished] = asyncio.get_running_loop().create_future()
        self._waiting.append((ack, answer))
        if self._writing is None:
            self._writing = asyncio.create_task(self._write())
        return await answer

    async def close(self) -> None:
        """Stop writing (at shutdown): the deliveries still waiting are cancelled."""
        writer = self._writing
        if writer is not None:
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
        self._abandon()  # a writer cancelled before it began ran no `finally`

    async def _write(self) -> None:
        """Write the waiting acks, a batch at a time, until none is left."""
        try:
            while self._waiting:
                self._batch = self._waiting[: self._max_batch]
                del self._waiting[: self._max_batch]
                try:
                    answers = await self._acks.finish([ack for ack, _ in self._batch])
                except Exception as exc:  # each waiting delivery decides what to do
                    for _, answer in self._batch:
                        if not answer.done():
                            answer.set_exception(exc)
                    continue
                for (_, answer), finished in zip(self._batch, answers, strict=True):
                    if not answer.done():
                        answer.set_result(finished)
        finally:
            self._abandon()

    def _abandon(self) -> None:
        """No delivery waits for an answer that will not come (none, after a batch)."""
        for _, answer in (*self._batch, *self._waiting):
            answer.cancel()  # no effect on an answer already given
        self._batch = []
        self._waiting.clear()
        self._writing = None
