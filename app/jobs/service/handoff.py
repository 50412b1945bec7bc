"""Workers: complete-and-lease, the acks of the jobs a worker finished and the lease of
its next ones in one call.

The acks are applied first, then the lease takes one look: on a limited queue the slots
the acks freed are there to take, so a worker that keeps asking keeps the limit's room
in use without a round trip. Only then are the other leases waiting on those queues
woken (none when the call's lease left no room), and only then does an empty lease
wait (`wait_seconds`), so that a freed slot never waits for it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence

from app.jobs.repository import Allowed
from app.jobs.service.acks import Ack, Acks, Finished
from app.jobs.service.leases import Leased, Leases, Wanted


class AckAndLease:
    """Complete or fail leases, then lease; see the module's documentation."""

    def __init__(self, acks: Acks, leases: Leases) -> None:
        self._acks = acks
        self._leases = leases

    async def __call__(
        self,
        acks: Sequence[Ack],
        wanted: Wanted,
        abandoned: Callable[[], Awaitable[bool]] | None = None,
        key_id: int | None = None,
        allowed: Allowed = None,
    ) -> tuple[list[Finished], Leased]:
        """The acks' answers, in order, and the leases. A lease no call could get is
        refused before any ack is applied."""
        self._leases.check(wanted, ("lease",))
        finished = await self._acks.finish(acks, key_id, hand_off=False)
        began = time.monotonic()
        look = dataclasses.replace(wanted, wait_seconds=0)
        try:
            leased = await self._leases.lease(look, key_id=key_id, allowed=allowed)
        except BaseException:
            await self._acks.hand_off(finished, frozenset())
            raise
        await self._acks.hand_off(finished, leased.full)
        left = wanted.wait_seconds - (time.monotonic() - began)
        if leased.leases or left <= 0:
            return finished, leased
        again = dataclasses.replace(wanted, wait_seconds=left)
        return finished, await self._leases.lease(again, abandoned, key_id, allowed)
