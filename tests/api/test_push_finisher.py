"""The push dispatcher's acks, written in batches (`app.push.service.finisher`): the acks
handed in while one batch is written share the next round trip, each gets its own
answer, and a batch that fails fails only its own deliveries."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import httpx
from fastapi import FastAPI

from app.core.errors import DatabaseUnavailable
from app.jobs import Ack, Acks, AttemptError, Finished
from app.push.service.finisher import Finisher
from tests.helpers import enqueue, lease


class Counted:
    """The service's own `Acks`, its `finish` calls counted (and made to fail when told)."""

    def __init__(self, acks: Acks) -> None:
        self._acks = acks
        self.batches: list[int] = []
        self.fail_next = False

    async def finish(self, acks: list[Ack]) -> list[Finished]:
        self.batches.append(len(acks))
        if self.fail_next:
            self.fail_next = False
            raise DatabaseUnavailable()
        return await self._acks.finish(acks)


def _finisher(app: FastAPI, max_batch: int = 1000) -> tuple[Finisher, Counted]:
    counted = Counted(app.state.services.jobs.acks)
    return Finisher(counted, max_batch=max_batch), counted  # type: ignore[arg-type]


async def _leases(client: httpx.AsyncClient, jobs: int) -> list[dict[str, Any]]:
    for n in range(jobs):
        await enqueue(client, "hooks", payload={"n": n})
    return await lease(client, "hooks", max_jobs=jobs)


async def test_acks_handed_in_together_share_a_round_trip(
    app: FastAPI, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    finisher, counted = _finisher(app)
    leased = await _leases(client, 6)
    acks = [Ack(x["lease_id"], "complete", {"n": i}) for i, x in enumerate(leased[:4])]
    error = AttemptError("http_500", "boom", {"status": 500})
    acks += [Ack(leased[4]["lease_id"], "fail", None, error, retryable=True)]
    acks += [Ack(leased[5]["lease_id"].split("-")[0] + "-" + "0" * 32, "complete")]  # not its lease
    answers = await asyncio.gather(*(finisher.finish(ack) for ack in acks))
    assert counted.batches == [6]
    assert [a.error is None for a in answers] == [True] * 5 + [False]
    assert answers[5].error is not None and answers[5].error.code == "lease_not_found"
    rows = await db.fetch("SELECT id, state, result FROM jobq.jobs ORDER BY id")
    assert [r["state"] for r in rows] == ["succeeded"] * 4 + ["queued", "running"]
    assert [r["result"] for r in rows[:4]] == [f'{{"n": {i}}}' for i in range(4)]


async def _writing(counted: Counted, batches: int) -> None:
    """Until the finisher has handed its `batches`-th batch to the service."""
    while len(counted.batches) < batches:
        await asyncio.sleep(0)


async def test_acks_that_come_during_a_write_go_in_the_next_batches(
    app: FastAPI, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    finisher, counted = _finisher(app, max_batch=2)
    leased = await _leases(client, 4)
    first = asyncio.ensure_future(finisher.finish(Ack(leased[0]["lease_id"], "complete")))
    await _writing(counted, 1)
    rest = [finisher.finish(Ack(x["lease_id"], "complete")) for x in leased[1:]]
    answers = [await first, *await asyncio.gather(*rest)]
    assert counted.batches == [1, 2, 1]  # the next batches at most two acks each
    assert all(a.error is None for a in answers)
    states = await db.fetch("SELECT state FROM jobq.jobs ORDER BY id")
    assert [s["state"] for s in states] == ["succeeded"] * 4


async def test_a_batch_that_fails_fails_its_own_deliveries_only(
    app: FastAPI, client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    finisher, counted = _finisher(app)
    leased = await _leases(client, 3)
    counted.fail_next = True
    first = asyncio.ensure_future(finisher.finish(Ack(leased[0]["lease_id"], "complete")))
    await _writing(counted, 1)
    rest = [finisher.finish(Ack(x["lease_id"], "complete")) for x in leased[1:]]
    answers = await asyncio.gather(first, *rest, return_exceptions=True)
    assert counted.batches == [1, 2]
    assert isinstance(answers[0], DatabaseUnavailable)
    assert all(isinstance(a, Finished) and a.error is None for a in answers[1:])
    states = await db.fetch("SELECT state FROM jobq.jobs ORDER BY id")
    assert [s["state"] for s in states] == ["running", "succeeded", "succeeded"]


async def test_closing_leaves_no_delivery_waiting(app: FastAPI, client: httpx.AsyncClient) -> None:
    finisher, _ = _finisher(app)
    leased = await _leases(client, 3)
    waiting = [
        asyncio.ensure_future(finisher.finish(Ack(x["lease_id"], "complete"))) for x in leased
    ]
    await asyncio.sleep(0)  # the first is being written, the others wait for the next batch
    await finisher.close()
    done, pending = await asyncio.wait(waiting, timeout=5)
    assert not pending and all(task.cancelled() for task in done)
