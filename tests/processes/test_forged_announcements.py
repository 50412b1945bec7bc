"""Forged announcements on two `jobq serve` processes: any database role may `NOTIFY`
on jobq's channels, so garbage, NaN, infinities, negative or huge counts and a flood
of well-formed ones must neither make a process spin nor stop its waiters' work."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import asyncpg
import httpx

from tests.conftest import plain
from tests.helpers import bearer, create_key
from tests.processes.replicas import Replica, stop_all

WAITERS_PER_REPLICA = 2
FLOOD_SECONDS = 2.0
LOOKS_BURST = 5  # app.jobs.waiting: a waiter's looks back to back ...
LOOKS_PER_SECOND = 20  # ... then a second at most
# What else is counted meanwhile: the replicas' maintenance passes and this test's reads,
# and commits made before a window but counted in it (a backend reports its statistics
# when idle, at most once a second, or up to ten seconds later). A process that spins
# makes thousands a second.
OTHER_COMMITS = 600
# An idle process uses a few milliseconds of CPU in this time; one spinning on a timer
# that never pops, most of a core (a fifth of one on a busy machine).
IDLE_SECONDS = 2.0
IDLE_CPU_SECONDS = 0.1
MALFORMED_DUE = [
    "qa NaN 1",
    "qa nan 1",
    "qa Infinity 1",
    "qa -Infinity",
    "qa 1e400 1",
    "qa 1 -1",
    "qa 1 1e3",
    "qa 1 99999999999999999999999999",
    "qa",
    "",
    "qa 1 1 1",
    " qa 1 1",
    "q\u00e9 1 1",
    "qa\n 1 1",
    "garbage",
    "qa 0x10 1",
]
MALFORMED_FINISHED = ["NaN", "-1", "0", "1e3", "99999999999999999999999", " 1", "x"]


def _cpu_seconds(pid: int) -> float:
    """The CPU time a process has used (user and system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _commits(conn: asyncpg.Connection) -> int:
    # statistics are a snapshot per transaction: each read is its own
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    value: int = await conn.fetchval(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
    )
    return value


async def _settled_commits(conn: asyncpg.Connection) -> int:
    """The commit count once the statistics caught up (they are flushed every second)."""
    await asyncio.sleep(1.2)
    return await _commits(conn)


async def _flood(database_url: str, channel: str, payloads: list[str]) -> int:
    """Announce `payloads` again and again for `FLOOD_SECONDS`: the commits it made."""
    conn = await asyncpg.connect(plain(database_url))
    sent = 0
    try:
        deadline = time.monotonic() + FLOOD_SECONDS
        while time.monotonic() < deadline:
            await conn.execute(
                "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", channel, payloads * 20
            )
            sent += 1
            await asyncio.sleep(0.005)
    finally:
        await conn.close()
    return sent


async def _lease(http: httpx.AsyncClient, url: str, wait: float) -> list[dict[str, object]]:
    body = {"queues": ["qa"], "types": ["real"], "wait_seconds": wait, "worker_id": "w"}
    answer = await http.post(f"{url}/v1/leases", json=body)
    assert answer.status_code == 200, answer.text
    leases: list[dict[str, object]] = answer.json()["leases"]
    return leases


async def _scenario(database_url: str, replicas: list[Replica], key: str) -> None:
    conn = await asyncpg.connect(plain(database_url))
    try:
        await _checks(
            database_url,
            conn,
            [replica.url for replica in replicas],
            [replica.process.pid for replica in replicas],
            key,
        )
    finally:
        await conn.close()


async def _checks(
    database_url: str, conn: asyncpg.Connection, urls: list[str], pids: list[int], key: str
) -> None:
    waiters = WAITERS_PER_REPLICA * len(urls)
    async with httpx.AsyncClient(headers=bearer(key), timeout=60) as http:
        # typed long polls: every announcement on their queue wakes them
        waiting = [
            asyncio.create_task(_lease(http, url, 3 * FLOOD_SECONDS + 4))
            for url in urls
            for _ in range(WAITERS_PER_REPLICA)
        ]
        await asyncio.sleep(1.5)  # they wait, and their processes hear announcements
        before = await _commits(conn)
        started = time.monotonic()
        now = time.time()
        flooded = await asyncio.gather(
            _flood(database_url, "jobq_due", [*MALFORMED_DUE, f"qa {now:.6f} 1", f"qa {now:.6f}"]),
            _flood(database_url, "jobq_finished", [*MALFORMED_FINISHED, "1"]),
        )
        elapsed = time.monotonic() - started
        during = await _settled_commits(conn) - before - sum(flooded)
        looks = waiters * (LOOKS_BURST + LOOKS_PER_SECOND * (elapsed + 1.2))
        assert during <= looks + OTHER_COMMITS, (during, looks)
        assert all(leased == [] for leased in await asyncio.gather(*waiting))

        # nobody waits now: a process that took a NaN to heart would still spin
        cpu = [_cpu_seconds(pid) for pid in pids]
        await asyncio.sleep(IDLE_SECONDS)
        used = [_cpu_seconds(pid) - before for pid, before in zip(pids, cpu, strict=True)]
        assert max(used) < IDLE_CPU_SECONDS, used

        # the waiters still get real work, on either process
        waiting = [asyncio.create_task(_lease(http, url, 10)) for url in urls]
        await asyncio.sleep(0.5)
        jobs = [{"type": "real", "payload": {"n": n}} for n in range(len(urls))]
        answer = await http.post(f"{urls[0]}/v1/queues/qa/jobs/batch", json={"jobs": jobs})
        assert answer.status_code in (200, 201), answer.text
        leased = [lease for leases in await asyncio.gather(*waiting) for lease in leases]
        assert len(leased) == len(urls)

        for url in urls:  # each process counted what it dropped
            metrics = (await http.get(f"{url}/metrics")).text
            assert 'jobq_announcements_dropped_total{channel="jobq_due"}' in metrics
            assert 'jobq_announcements_dropped_total{channel="jobq_finished"}' in metrics


async def _forget_keys(database_url: str) -> None:
    conn = await asyncpg.connect(plain(database_url))
    try:
        await conn.execute("TRUNCATE jobq.api_keys RESTART IDENTITY")
    finally:
        await conn.close()


def test_forged_announcements_neither_spin_nor_stop_work(database_url: str, tmp_path: Path) -> None:
    key = asyncio.run(create_key(database_url, "worker", ["enqueue", "work", "read"], ["qa"]))
    replicas: list[Replica] = []
    try:
        for name in ("first", "second"):
            replicas.append(Replica(database_url, tmp_path / f"{name}.log"))
        asyncio.run(_scenario(database_url, replicas, key))
    finally:
        stop_all(replicas)
        asyncio.run(_forget_keys(database_url))  # the other tests rely on open mode
    logged = [replica.log.read_text().count("malformed announcement") for replica in replicas]
    assert all(1 <= count <= 2 for count in logged), logged  # once per interval, not per drop
