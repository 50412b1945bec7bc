"""`jobq.queue_types` (migration 0022): the (queue, type) pairs leases handed out, each
written at most once every few seconds by a process, never once per job."""

from __future__ import annotations

import os
from typing import Any, cast

import asyncpg

from app.db.migrate import upgrade
from app.jobs import JobsRepository
from app.jobs.rows import JobRow
from app.jobs.service.leases import LeasedTypes
from tests.conftest import _drop, _recreate, plain
from tests.db.test_migration_0016 import downgrade

_TABLE = "SELECT to_regclass('jobq.queue_types') IS NOT NULL"


async def test_migration_0022_goes_down_and_up_again(server_url: str) -> None:
    name = f"jobq_migration_0022_{os.getpid()}"
    url = await _recreate(server_url, name)  # at head
    conn = await asyncpg.connect(plain(url))
    try:
        assert await conn.fetchval(_TABLE)
        await downgrade(url, "0021")
        assert not await conn.fetchval(_TABLE)
        await upgrade(url)
        assert await conn.fetchval(_TABLE)
    finally:
        await conn.close()
        await _drop(server_url, name)


class _Recorded:
    def __init__(self) -> None:
        self.calls: list[list[tuple[str, str]]] = []

    async def record_leased_types(self, pairs: list[tuple[str, str]]) -> None:
        self.calls.append(pairs)


def _jobs(*pairs: tuple[str, str]) -> list[JobRow]:
    empty: dict[str, Any] = dict.fromkeys(JobRow._fields)
    return [JobRow(**{**empty, "queue": queue, "type": type_}) for queue, type_ in pairs]


async def test_a_pair_is_written_once_per_interval_however_many_leases() -> None:
    recorded = _Recorded()
    types = LeasedTypes(cast(JobsRepository, recorded), every_seconds=3600)
    await types.leased(_jobs(("mail", "send"), ("mail", "send"), ("mail", "bounce")))
    for _ in range(10):
        await types.leased(_jobs(("mail", "send")))
    await types.leased(_jobs(("mail", "send"), ("reports", "daily")))
    assert recorded.calls == [[("mail", "bounce"), ("mail", "send")], [("reports", "daily")]]
    again = LeasedTypes(cast(JobsRepository, recorded), every_seconds=0)
    await again.leased(_jobs(("mail", "send")))
    await again.leased(_jobs(("mail", "send")))
    assert recorded.calls[2:] == [[("mail", "send")], [("mail", "send")]]
