"""Dependencies under concurrency and at scale, on real connections: two parents finishing
at once release their child exactly once; a child enqueued while its parent finishes is
never left waiting, nor one whose producer's transaction was still open when its parent
ended; a fan-in of 10,000 parents and a chain of 1,000 jobs both complete, and no
parent's finish reads the jobs or dependencies tables sequentially."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.conftest import plain

ROUNDS = 40


@pytest.fixture
async def conns(
    database_url: str, db: asyncpg.Connection
) -> AsyncIterator[list[asyncpg.Connection]]:
    """Three more connections of their own (committed rows, real concurrency)."""
    del db  # emptied the tables
    opened = [await asyncpg.connect(plain(database_url)) for _ in range(3)]
    yield opened
    for conn in opened:
        await conn.close()


async def _enqueue(conn: asyncpg.Connection, queue: str, *parents: int) -> int:
    job_id: int = await conn.fetchval(
        "SELECT id FROM jobq.enqueue(queue => $1, type => 't', depends_on => $2)",
        queue,
        list(parents) or None,
    )
    return job_id


FINISH = "UPDATE jobq.jobs SET state = 'succeeded', finished_at = now() WHERE id = $1"


async def test_two_parents_finishing_at_once_release_their_child_exactly_once(
    conns: list[asyncpg.Connection], db: asyncpg.Connection
) -> None:
    first, second, listener = conns
    announced: list[str] = []
    await listener.add_listener("jobq_due", lambda *args: announced.append(str(args[3])))
    for _ in range(ROUNDS):
        a = await _enqueue(db, "p")
        b = await _enqueue(db, "p")
        child = await _enqueue(db, "child", a, b)
        await asyncio.gather(first.execute(FINISH, a), second.execute(FINISH, b))
        row = await db.fetchrow(
            "SELECT state::text, waiting_for FROM jobq.jobs WHERE id = $1", child
        )
        assert row is not None and tuple(row) == ("queued", 0)
    await asyncio.sleep(0.3)
    released = [payload for payload in announced if payload.startswith("child ")]
    assert len(released) == ROUNDS  # one wake-up per child: released once each


async def test_a_child_enqueued_while_its_parent_finishes_never_waits_forever(
    conns: list[asyncpg.Connection], db: asyncpg.Connection
) -> None:
    producer, finisher, _ = conns
    for _ in range(ROUNDS):
        parent = await _enqueue(db, "p")
        child, _ = await asyncio.gather(
            _enqueue(producer, "child", parent), finisher.execute(FINISH, parent)
        )
        state = await db.fetchval("SELECT state::text FROM jobq.jobs WHERE id = $1", child)
        assert state == "queued", f"child {child} of {parent} is {state}"


async def test_a_failure_racing_a_child_enqueue_cancels_the_child(
    conns: list[asyncpg.Connection], db: asyncpg.Connection
) -> None:
    producer, finisher, _ = conns
    fail = "UPDATE jobq.jobs SET state = 'failed', finished_at = now() WHERE id = $1"
    for _ in range(ROUNDS):
        parent = await _enqueue(db, "p")
        child, _ = await asyncio.gather(
            _enqueue(producer, "child", parent), finisher.execute(fail, parent)
        )
        state = await db.fetchval("SELECT state::text FROM jobq.jobs WHERE id = $1", child)
        assert state == "cancelled"


async def _seq_scans(conn: asyncpg.Connection) -> dict[str, int]:
    """The sequential scans of the jobs and their dependencies in `conn`'s transaction so
    far (no other session's: the test database's own service may be reading too)."""
    rows = await conn.fetch(
        "SELECT relname, seq_scan FROM pg_stat_xact_user_tables"
        " WHERE schemaname = 'jobq' AND relname IN ('jobs', 'job_dependencies')"
    )
    return {r["relname"]: r["seq_scan"] for r in rows}


async def test_fan_in_and_chains_work_and_finishes_read_through_indexes(
    db: asyncpg.Connection,
) -> None:
    # Fan-in: 10,000 parents, one child.
    await db.execute(
        "INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds)"
        " SELECT 'fan', 't', 'null', 5, 60 FROM generate_series(1, 10000)"
    )
    parents = [r["id"] for r in await db.fetch("SELECT id FROM jobq.jobs ORDER BY id")]
    child = await _enqueue(db, "fan-in", *parents)
    assert await db.fetchval("SELECT waiting_for FROM jobq.jobs WHERE id = $1", child) == 10000
    # Chain: 1,000 jobs, each waiting for the one before (past the default depth limit).
    await db.execute("UPDATE jobq.enqueue_limits SET max_dependency_depth = 1000")
    chain = [await _enqueue(db, "chain")]
    for _ in range(999):
        chain.append(await _enqueue(db, "chain", chain[-1]))
    await db.execute("ANALYZE jobq.jobs")
    await db.execute("ANALYZE jobq.job_dependencies")
    async with db.transaction():
        before = await _seq_scans(db)
        await db.executemany(FINISH, [(parent,) for parent in parents])  # one by one
        for job_id in chain:  # each link finishes, which releases the next
            state = await db.fetchval("SELECT state::text FROM jobq.jobs WHERE id = $1", job_id)
            assert state == "queued", job_id
            await db.execute(FINISH, job_id)
        after = await _seq_scans(db)

    assert await db.fetchval("SELECT state::text FROM jobq.jobs WHERE id = $1", child) == "queued"
    assert (
        await db.fetchval(
            "SELECT count(*) FROM jobq.jobs WHERE queue = 'chain' AND state = 'succeeded'"
        )
        == 1000
    )
    # 11,000 parents finished, and the waiting jobs were found through indexes only.
    assert after == before, (before, after)


ENDS = {
    "queued": "UPDATE jobq.jobs SET state = 'succeeded', finished_at = now() WHERE id = $1",
    "cancelled": "UPDATE jobq.jobs SET state = 'failed', finished_at = now() WHERE id = $1",
    "deleted": "DELETE FROM jobq.jobs WHERE id = $1",
}


async def _produce_slowly(
    conn: asyncpg.Connection, made: asyncio.Event, pause: float, *parents: int
) -> int:
    """Enqueue a child of `parents` in a transaction that stays open `pause` seconds
    after it (`made` is set then)."""
    async with conn.transaction():
        child = await _enqueue(conn, "child", *parents)
        made.set()
        await asyncio.sleep(pause)
    return child


async def _end_after(
    conn: asyncpg.Connection, made: asyncio.Event, pause: float, *ends: tuple[str, int]
) -> None:
    """Once the child is made, wait `pause` seconds, then end its parents."""
    await made.wait()
    await asyncio.sleep(pause)
    for statement, job_id in ends:
        await conn.execute(statement, job_id)


async def test_a_parent_ending_while_a_producer_holds_its_child_uncommitted(
    conns: list[asyncpg.Connection], db: asyncpg.Connection
) -> None:
    """The enqueue locks no parent: the check at the producer's commit settles the child
    for a parent that succeeded, failed or was deleted while the transaction was open."""
    producer, finisher, _ = conns
    rng = random.Random(43)
    for round_ in range(ROUNDS):
        expected = list(ENDS)[round_ % len(ENDS)]
        parent = await _enqueue(db, "p")
        marked = await _enqueue(db, "p")  # a parent some child already marked
        await _enqueue(db, "first", marked)
        made = asyncio.Event()
        child, _ = await asyncio.gather(
            _produce_slowly(producer, made, rng.uniform(0, 0.02), parent, marked),
            _end_after(
                finisher,
                made,
                rng.uniform(0, 0.02),
                (ENDS[expected], parent),
                (ENDS["queued"], marked),
            ),
        )
        state = await db.fetchval("SELECT state::text FROM jobq.jobs WHERE id = $1", child)
        wanted = "cancelled" if expected == "deleted" else expected
        assert state == wanted, f"round {round_}: child of a parent {expected} is {state}"
