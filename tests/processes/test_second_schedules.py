"""Second-level schedules on two `jobq serve` processes (directly and behind PgBouncer):
a 6-field cron and an interval, every 2 s, each tick made exactly once, none missed,
while one replica is killed (SIGKILL) midway."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.conftest import plain
from tests.processes.replicas import Replica, stop_all

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

PERIOD = timedelta(seconds=2)
# Fifteen ticks of each schedule over 30 s, a kill among them: each tick once, none
# lost, on any replica.
RUN_SECONDS = 30
SCHEDULES = {"cron-2s": "*/2 * * * * *", "every-2s": "@every 2s"}


async def _ticks(database_url: str) -> dict[str, list[datetime]]:
    conn = await asyncpg.connect(plain(database_url))
    try:
        rows = await conn.fetch(
            "SELECT metadata->>'schedule' AS schedule, (metadata->>'tick')::timestamptz AS tick"
            " FROM jobq.jobs WHERE type = 'probe' ORDER BY 2"
        )
    finally:
        await conn.close()
    found: dict[str, list[datetime]] = {name: [] for name in SCHEDULES}
    for row in rows:
        found[row["schedule"]].append(row["tick"])
    return found


@pytest.mark.timeout(180)
async def test_every_tick_once_on_two_replicas_one_killed(
    service_urls: dict[str, str], database_url: str, db: asyncpg.Connection, tmp_path: Path
) -> None:
    env = {f"JOBQ_{name.upper()}": url for name, url in service_urls.items()}
    url = env.pop("JOBQ_DATABASE_URL")
    replicas = [Replica(url, tmp_path / f"replica-{n}.log", **env) for n in range(2)]
    try:
        async with httpx.AsyncClient(base_url=replicas[1].url, timeout=30) as http:
            for name, cron in SCHEDULES.items():
                body = {"queue": "probes", "type": "probe", "cron": cron}
                answer = await http.put(f"/v1/schedules/{name}", json=body)
                assert answer.status_code in (200, 201), answer.text
                first, second = map(datetime.fromisoformat, answer.json()["next_runs"][:2])
                assert second - first == PERIOD
            started = datetime.fromisoformat(answer.json()["next_runs"][0])
            await asyncio.sleep(RUN_SECONDS / 2)
            replicas[0].kill()
            await asyncio.sleep(RUN_SECONDS / 2)
            for name in SCHEDULES:
                assert (await http.post(f"/v1/schedules/{name}/pause")).status_code == 200
    finally:
        stop_all(replicas)

    ended = started + timedelta(seconds=RUN_SECONDS)
    for name, ticks in (await _ticks(database_url)).items():
        assert len(ticks) == len(set(ticks)), f"{name}: a tick was made twice"
        assert ticks, name
        # every 2 s from the first to the last: none lost, none twice
        assert ticks == [ticks[0] + k * PERIOD for k in range(len(ticks))], name
        assert ticks[0] <= started + PERIOD, name
        assert ticks[-1] >= ended - 2 * PERIOD, name  # made up to the pause
