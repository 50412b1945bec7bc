"""Schedules on several `jobq serve` processes at once, all killed (SIGKILL) while they
catch up and restarted: every tick is enqueued exactly once, none is lost."""

from __future__ import annotations

import asyncio
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.conftest import plain
from tests.processes.replicas import Replica, stop_all

# Processes running jobq's own logic, which no database mode changes: one CI run of two
pytestmark = pytest.mark.once("embedded")

REPO = Path(__file__).resolve().parents[2]
REPLICAS = 3
ROUNDS = 4
SCHEDULES_PER_ROUND = 120  # over the scheduler's batch of 100: two transactions a pass
MISSED_MINUTES = 30
START_TIMEOUT_SECONDS = 60


def _schedule(name: str, catch_up: str, zone: str) -> dict[str, object]:
    return {
        "queue": f"ticks-{catch_up}",
        "type": "tick",
        "cron": "* * * * *",
        "timezone": zone,
        "catch_up": catch_up,
        "catch_up_limit": 1000,
        "payload": {"schedule": name},
    }


async def _backdate(database_url: str, names: list[str], since: datetime) -> None:
    conn = await asyncpg.connect(plain(database_url))
    try:
        await conn.execute(
            "UPDATE jobq.schedules SET next_tick = $2 WHERE name = ANY($1)", names, since
        )
    finally:
        await conn.close()


async def _caught_up(database_url: str, names: list[str]) -> int:
    conn = await asyncpg.connect(plain(database_url))
    try:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM jobq.schedules WHERE name = ANY($1) AND last_tick IS NOT NULL",
            names,
        )
        return count
    finally:
        await conn.close()


async def _made(database_url: str) -> tuple[list[asyncpg.Record], list[asyncpg.Record]]:
    conn = await asyncpg.connect(plain(database_url))
    try:
        jobs = await conn.fetch(
            "SELECT metadata->>'schedule' AS schedule, (metadata->>'tick')::timestamptz AS tick"
            " FROM jobq.jobs WHERE type = 'tick'"
        )
        schedules = await conn.fetch(
            "SELECT name, catch_up, last_tick, next_tick FROM jobq.schedules"
        )
        return jobs, schedules
    finally:
        await conn.close()


# Fifteen `jobq serve` starts (three a round, and the first three): 44 s alone, and once
# over the suite's 120 s beside the other database mode's run on two cores.
@pytest.mark.timeout(300)
def test_every_tick_once_while_replicas_race_and_die(database_url: str, tmp_path: Path) -> None:
    rng = random.Random(15)
    started = 0

    def replica() -> Replica:
        nonlocal started
        started += 1
        log = tmp_path / f"replica-{started}.log"
        return Replica(database_url, log, JOBQ_SCHEDULER_INTERVAL_SECONDS="0.1")

    replicas = [replica() for _ in range(REPLICAS)]
    zones = ["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata"]
    since: dict[str, datetime] = {}
    unfinished: list[bool] = []  # per round: killed before every schedule caught up
    try:
        for round_ in range(ROUNDS):
            names = [f"r{round_}-{i}" for i in range(SCHEDULES_PER_ROUND)]
            # every schedule is paused while it is made, then backdated and resumed at once
            with httpx.Client(base_url=replicas[0].url, timeout=30) as http:
                for i, name in enumerate(names):
                    catch_up = "all" if i % 3 else "latest"
                    body = {**_schedule(name, catch_up, zones[i % len(zones)]), "paused": True}
                    assert http.put(f"/v1/schedules/{name}", json=body).status_code == 201
            minute = datetime.now(UTC).replace(second=0, microsecond=0)
            start = minute - timedelta(minutes=MISSED_MINUTES)
            asyncio.run(_backdate(database_url, names, start))
            for name in names:
                since[name] = start

            async def resume(names: list[str] = names) -> None:
                conn = await asyncpg.connect(plain(database_url))
                try:
                    await conn.execute(
                        "UPDATE jobq.schedules SET paused = false WHERE name = ANY($1)", names
                    )
                finally:
                    await conn.close()

            asyncio.run(resume())
            # the replicas race to catch up; all of them die at a random moment of it
            time.sleep(rng.uniform(0.05, 0.5))
            for victim in replicas:
                victim.kill()
            unfinished.append(asyncio.run(_caught_up(database_url, names)) < len(names))
            replicas = [replica() for _ in range(REPLICAS)]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            _, schedules = asyncio.run(_made(database_url))
            if all(s["last_tick"] is not None for s in schedules):
                break
            time.sleep(0.2)
    finally:
        stop_all(replicas)

    jobs, schedules = asyncio.run(_made(database_url))
    assert any(unfinished), "no kill came in the middle of a catch-up"
    ticks: dict[str, list[datetime]] = {}
    for job in jobs:
        ticks.setdefault(job["schedule"], []).append(job["tick"])
    assert len(schedules) == ROUNDS * SCHEDULES_PER_ROUND
    for schedule in schedules:
        made = sorted(ticks.get(schedule["name"], []))
        assert len(made) == len(set(made)), f"{schedule['name']}: a tick was made twice"
        last = schedule["last_tick"]
        assert last is not None and made and made[-1] == last, schedule["name"]
        assert schedule["next_tick"] > last
        if schedule["catch_up"] == "all":
            # each minute from the backdated start to the last tick: none lost, none twice
            expected = []
            tick = since[schedule["name"]]
            while tick <= last:
                expected.append(tick)
                tick += timedelta(minutes=1)
            assert made == expected, schedule["name"]
            assert len(made) >= MISSED_MINUTES
        else:
            # one job for the most recent missed tick (and any minute that came since)
            assert made[0] >= since[schedule["name"]] + timedelta(minutes=MISSED_MINUTES)
            assert made == [made[0] + timedelta(minutes=k) for k in range(len(made))]
