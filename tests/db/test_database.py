"""Migrations under concurrency, the hot statements' cached plans, and what a lease's commit
waits for."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from alembic.script import ScriptDirectory

from app.db.migrate import alembic_config, upgrade
from app.db.statement import Statement
from app.jobs import repository as jobs_sql
from app.queues import repository as queues_sql
from tests.conftest import _drop, _recreate, plain
from tests.fixtures.queries import REPOSITORIES
from tests.statements import args_of

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/nothing"


async def test_replicas_migrating_at_once_are_safe(server_url: str) -> None:
    url = await _recreate(server_url, "jobq_test_migrate")  # already at head once
    conn = await asyncpg.connect(plain(url))
    try:
        await conn.execute("DROP SCHEMA jobq CASCADE")
        await asyncio.gather(*(upgrade(url) for _ in range(4)))
        version = await conn.fetchval("SELECT version_num FROM jobq.alembic_version")
        assert version == ScriptDirectory.from_config(alembic_config()).get_current_head()
        assert await conn.fetchval("SELECT count(*) FROM jobq.jobs") == 0
    finally:
        await conn.close()
        await _drop(server_url, "jobq_test_migrate")


def _scans(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of an EXPLAIN (FORMAT JSON) plan that reads a table."""
    if "Scan" in plan["Node Type"]:
        yield plan
    for child in plan.get("Plans", []):
        yield from _scans(child)


async def _quiet_spell(db: asyncpg.Connection) -> None:
    """Statistics as after a quiet spell: many finished jobs, nothing queued, running or
    dead, so that a partial index of such jobs looks nearly empty to the planner."""
    await db.execute(
        """
        INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds,
                               lease_id, finished_at)
        SELECT 'q', 't', '{}', 'succeeded', 5, 60, gen_random_uuid(), now()
          FROM generate_series(1, 20000)
        """
    )
    await db.execute("ANALYZE jobq.jobs")


@pytest.mark.parametrize(
    "name", ["FINISH_MANY", "FINISH_ONE", "COMPLETE_MANY", "COMPLETE_ONE", "HEARTBEAT"]
)
async def test_a_cached_plan_finds_each_lease_through_its_primary_key(
    db: asyncpg.Connection, name: str
) -> None:
    # Statistics as after a quiet spell: many finished jobs, none running. A plain join
    # of the acks to the jobs let the generic plan walk every running job once per ack;
    # a heartbeat's `state = 'running'` let it walk them all for its one job.
    await _quiet_spell(db)
    statement = getattr(jobs_sql, name)
    await db.execute(f"PREPARE finish AS {statement.sql}")
    await db.execute("SET plan_cache_mode = force_generic_plan")
    nulls = ", ".join("NULL" for _ in statement.names)
    plan = json.loads(await db.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE finish({nulls})"))
    jobs_scans = [s for s in _scans(plan[0]["Plan"]) if s.get("Relation Name") == "jobs"]
    assert jobs_scans, plan
    assert {(s["Node Type"], s.get("Index Name")) for s in jobs_scans} == {
        ("Index Scan", "jobs_pkey")
    }, plan


# The one statement that may change jobs it did not find by id: retention deletes the
# oldest finished jobs in batches, and its generic plan may hash-join them.
_FOUND_OTHERWISE = {"app.maintenance.repository.PRUNE_FINISHED"}


def _targets(plan: dict[str, Any], target: str | None = None) -> Iterator[dict[str, Any]]:
    """The scans that find the rows an UPDATE or DELETE of jobq.jobs changes."""
    if plan["Node Type"] == "ModifyTable":
        target = plan["Alias"] if plan.get("Relation Name") == "jobs" else None
    elif target is not None and "Scan" in plan["Node Type"] and plan.get("Alias") == target:
        yield plan
    for child in plan.get("Plans", []):
        yield from _targets(child, target)


async def test_every_cached_plan_changes_jobs_through_their_primary_key(
    db: asyncpg.Connection,
) -> None:
    # Statistics as after a quiet spell: many finished jobs, nothing queued, running or
    # dead. A state test in the WHERE of an UPDATE or DELETE by id (`state = 'queued'`)
    # matched a partial index's predicate, and the generic plan walked that whole index
    # (every queued, running or failed job) for each job it changed.
    await _quiet_spell(db)
    await db.execute("SET plan_cache_mode = force_generic_plan")
    checked = []
    for module in REPOSITORIES:
        for name, statement in vars(module).items():
            if not isinstance(statement, Statement):
                continue
            await db.execute(f"PREPARE s AS {statement.sql}")
            try:
                nulls = ", ".join("NULL" for _ in statement.names)
                call = f"EXECUTE s({nulls})" if statement.names else "EXECUTE s"
                plan = json.loads(await db.fetchval(f"EXPLAIN (FORMAT JSON) {call}"))
            finally:
                await db.execute("DEALLOCATE s")
            where = f"{module.__name__}.{name}"
            for scan in _targets(plan[0]["Plan"]):
                checked.append(where)
                if where not in _FOUND_OTHERWISE:
                    assert (scan["Node Type"], scan.get("Index Name")) == (
                        "Index Scan",
                        "jobs_pkey",
                    ), (where, scan)
    # the statements that change jobs by id, in every domain that has some
    assert {"app.jobs.repository.HEARTBEAT", "app.jobs.repository.LEASE_LIMITED"} <= set(checked)
    assert {"app.jobs.repository.RETRY_JOB", "app.queues.repository.PURGE_QUEUED"} <= set(checked)
    assert "app.maintenance.repository.REAP_EXPIRED" in checked


@pytest.mark.parametrize("name", ["LEASE_LIMITED", "LIMITED_QUEUE_STATE"])
async def test_a_limited_queue_counts_only_its_own_running_jobs(
    db: asyncpg.Connection, name: str
) -> None:
    # A fleet busy elsewhere: 5,000 jobs running in other queues, 10 in the limited one.
    # Counted through the lease-expiry index (gone since migration 0020), each limited
    # lease read them all.
    await db.execute(
        """
        INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds,
                               lease_id, lease_expires_at, attempt)
        SELECT CASE WHEN g <= 10 THEN 'limited' ELSE 'busy' || g % 7 END, 't', '{}',
               'running', 5, 60, gen_random_uuid(), now() + interval '60 s', 1
          FROM generate_series(1, 5010) AS g
        """
    )
    await db.execute("ANALYZE jobq.jobs")
    statement = getattr(jobs_sql, name)
    values = {"queue": "'limited'", "types": "ARRAY[]::text[]", "max_jobs": "10"}
    arguments = ", ".join(values.get(n, "NULL") for n in statement.names)
    await db.execute(f"PREPARE s AS {statement.sql}")
    try:
        for mode in ("force_custom_plan", "force_generic_plan"):
            await db.execute(f"SET plan_cache_mode = {mode}")
            explained = await db.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE s({arguments})")
            scans = list(_scans(json.loads(explained)[0]["Plan"]))
            indexes = {s.get("Index Name") for s in scans}  # a bitmap scan's is its child's
            assert "jobs_running_idx" in indexes, (mode, scans)
            assert not [
                s for s in scans if s["Node Type"] == "Seq Scan" and s["Relation Name"] == "jobs"
            ], (mode, scans)
    finally:
        await db.execute("DEALLOCATE s")
        await db.execute("RESET plan_cache_mode")


async def test_the_running_jobs_index_keeps_each_entry_apart(db: asyncpg.Connection) -> None:
    # Deduplicated, a queue's running jobs (all one key) share posting lists, which each
    # lease rewrites: the costliest index of a drain (migration 0018).
    options = await db.fetchval(
        "SELECT reloptions FROM pg_class WHERE oid = 'jobq.jobs_running_idx'::regclass"
    )
    assert options == ["deduplicate_items=off"]


async def test_a_cached_plan_updates_leased_jobs_through_their_primary_key(
    db: asyncpg.Connection,
) -> None:
    # Statistics of a small table (a fresh install): an UPDATE joined to the picked ids
    # got a generic plan that merge-joined along jobs_pkey from its first row, reading
    # every finished job once the table had grown.
    await db.execute(
        """
        INSERT INTO jobq.jobs (queue, type, payload, state, max_attempts, lease_seconds,
                               finished_at)
        SELECT 'q', 't', '{}', 'succeeded', 5, 60, now() FROM generate_series(1, 2000)
        """
    )
    await db.execute(
        "INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds)"
        " SELECT 'q', 't', '{}', 5, 60 FROM generate_series(1, 2000)"
    )
    await db.execute("ANALYZE jobq.jobs")
    await db.execute(f"PREPARE lease AS {jobs_sql.LEASE.sql}")
    values = {
        "queues": "ARRAY['q']",
        "types": "ARRAY[]::text[]",
        "max_jobs": "100",
        "lease_seconds": "NULL",
        "worker_id": "'w'",
        "key_id": "NULL",
    }
    arguments = ", ".join(values[name] for name in jobs_sql.LEASE.names)
    try:
        for mode in ("force_custom_plan", "force_generic_plan"):
            await db.execute(f"SET plan_cache_mode = {mode}")
            explained = await db.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE lease({arguments})")
            plan = json.loads(explained)[0]["Plan"]
            jobs_scans = {
                (s["Node Type"], s.get("Index Name"))
                for s in _scans(plan)
                if s.get("Relation Name") == "jobs"
            }
            assert jobs_scans == {
                ("Index Scan", "jobs_claim_idx"),
                ("Index Scan", "jobs_pkey"),
            }, (mode, plan)
    finally:
        await db.execute("DEALLOCATE lease")
        await db.execute("RESET plan_cache_mode")


async def test_the_enqueue_statement_keeps_a_cached_generic_plan(db: asyncpg.Connection) -> None:
    # Admission control's counts, written inline, made the generic plan look costly, so
    # PostgreSQL planned every enqueue afresh (~0.5 ms of its CPU); behind a function
    # (migration 0007) the default plan cache mode settles on the generic plan.
    await db.execute("INSERT INTO jobq.queues (name, max_backlog) VALUES ('full', 1)")
    # A backlog in one queue, and enqueues into others, rare in the statistics: for them
    # the inline counts made a plan for the call's own values look far cheaper.
    await db.execute(
        "INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds)"
        " SELECT 'q', 't', '{}', 5, 60 FROM generate_series(1, 20000)"
    )
    await db.execute("ANALYZE jobq.jobs")
    statement = jobs_sql.ENQUEUE_ONE
    await db.execute(f"PREPARE enqueue AS {statement.sql}")
    try:
        values = {"type": "'t'", "payload": "'{}'", "priority": "0", "run_at": "NULL",
                  "delay_seconds": "0", "max_attempts": "5", "lease_seconds": "60",
                  "idempotency_key": "NULL", "metadata": "'{}'", "concurrency_key": "NULL",
                  "runs_on_parent_failure": "false", "fairness_key": "NULL",
                  "default_max_attempts": "5", "default_lease_seconds": "60",
                  "timeout_seconds": "NULL", "start_by": "NULL", "unique": "NULL",
                  "traceparent": "NULL", "tracestate": "NULL"}  # fmt: skip
        for queue in ("new", "full") * 6:
            literals = {**values, "queue": f"'{queue}'"}
            await db.execute(f"EXECUTE enqueue({', '.join(literals[n] for n in statement.names)})")
        plans = await db.fetchrow(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'enqueue'"
        )
        assert plans is not None
        assert plans["generic_plans"] >= 6, dict(plans)
        # Admission control still counted through the function: one job got into `full`.
        assert await db.fetchval("SELECT count(*) FROM jobq.jobs WHERE queue = 'full'") == 1
        assert await db.fetchval("SELECT count(*) FROM jobq.jobs WHERE queue = 'new'") == 6
    finally:
        await db.execute("DEALLOCATE enqueue")


async def test_leases_commit_without_a_flush_each_and_later_statements_stay_durable(
    db: asyncpg.Connection,
) -> None:
    await db.execute(
        "INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds)"
        " SELECT 'q', 't', '{}', 5, 60 FROM generate_series(1, 100)"
    )
    values = {"queues": ["q"], "types": [], "max_jobs": 1, "lease_seconds": None,
              "worker_id": "w", "key_id": None}  # fmt: skip
    # WAL syncs of the whole server: in pg_stat_io from PostgreSQL 18, pg_stat_wal before
    if await db.fetchval("SELECT current_setting('server_version_num')::int") >= 180000:
        syncs = "SELECT sum(fsyncs) FROM pg_stat_io WHERE object = 'wal'"
    else:
        syncs = "SELECT wal_sync FROM pg_stat_wal"
    await db.execute("SELECT pg_stat_force_next_flush()")
    before = await db.fetchval(syncs)
    for _ in range(100):
        assert len(await db.fetch(jobs_sql.LEASE.sql, *args_of(jobs_sql.LEASE, values))) == 1
    await db.execute("SELECT pg_stat_force_next_flush()")
    # A flush per lease would be 100 syncs; the WAL writer syncs a few times at most.
    assert await db.fetchval(syncs) - before < 50
    # Only the lease's own transaction: the next statement on this connection commits
    # durably again (an enqueue after a lease on a pooled connection must).
    assert await db.fetchval("SHOW synchronous_commit") == "on"


@pytest.mark.parametrize(
    ("limit", "durable"),
    [("NULL", False), ("10", True)],
    ids=["without_limits", "with_max_running"],
)
async def test_a_fair_lease_waits_for_the_wal_flush_only_under_a_limit(
    db: asyncpg.Connection, limit: str, durable: bool
) -> None:
    # jobq.lease_fair (migration 0044): a lost lease's jobs, already running, would let
    # a limit be passed; with none, it commits as the plain lease does
    await db.execute(
        f"INSERT INTO jobq.queues (name, ordering, max_running) VALUES ('f', 'fair', {limit})"
    )
    await db.execute(
        "INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds, fairness_key)"
        " VALUES ('f', 't', '{}', 5, 60, 'A')"
    )
    async with db.transaction():
        leased = await db.fetch("SELECT * FROM jobq.lease_fair('f', '{}', 1, NULL, 'w', NULL)")
        assert len(leased) == 1
        assert await db.fetchval("SHOW synchronous_commit") == ("on" if durable else "off")
    assert await db.fetchval("SHOW synchronous_commit") == "on"


async def _flooded_fair_queue(db: asyncpg.Connection) -> None:
    """Statistics as one tenant's flood leaves them: a fair queue of 20,000 queued jobs of
    key A and a few of B and C (most of the table's jobs are A's)."""
    await db.execute("INSERT INTO jobq.queues (name, ordering) VALUES ('fair', 'fair')")
    await db.execute(
        """
        INSERT INTO jobq.jobs (queue, type, payload, max_attempts, lease_seconds, fairness_key)
        SELECT 'fair', 't', '{}', 5, 60, CASE WHEN g <= 20000 THEN 'A' ELSE chr(64 + g % 3) END
          FROM generate_series(1, 20010) AS g
        """
    )
    await db.execute("ANALYZE jobq.jobs")


@pytest.mark.parametrize(
    "statement",
    [jobs_sql.FAIR_QUEUE_STATE, queues_sql.BUSIEST_FAIR_KEYS],
    ids=["fair_queue_state", "busiest_fair_keys"],
)
async def test_a_fair_queue_reads_each_keys_jobs_along_its_index(
    db: asyncpg.Connection, statement: Statement[Any]
) -> None:
    # With `fairness_key = key` the planner dropped the fixed column from the probes'
    # order, and its cached plan walked jobs_claim_idx past A's 20,000 jobs for each key
    # (B-K's leases took seconds behind a 200,000-job flood: issue 49's bench).
    await _flooded_fair_queue(db)
    await db.execute(f"PREPARE s AS {statement.sql}")
    await db.execute("SET plan_cache_mode = force_generic_plan")
    nulls = ", ".join("NULL" for _ in statement.names)
    plan = json.loads(await db.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE s({nulls})"))
    indexes = {s.get("Index Name") for s in _scans(plan[0]["Plan"])}
    assert "jobs_claim_idx" not in indexes, plan
    assert "jobs_fair_claim_idx" in indexes, plan


async def test_a_fair_lease_reads_each_keys_jobs_along_its_index(db: asyncpg.Connection) -> None:
    # jobq.lease_fair's claim (migration 0044), with its generic plan as the function
    # runs it: its parameters and the time it takes after the queue's lock as $n
    await _flooded_fair_queue(db)
    source = await db.fetchval("SELECT prosrc FROM pg_proc WHERE proname = 'lease_fair'")
    claim = source[source.index("RETURN QUERY") + len("RETURN QUERY") : source.rindex(";")]
    names = ["queue", "types", "max_jobs", "lease_seconds", "worker_id", "key_id"]
    for n, name in enumerate(names, start=1):
        claim = re.sub(rf"\blease_fair\.{name}\b", f"${n}", claim)
    claim = re.sub(r"\blocked_at\b", f"${len(names) + 1}", claim)
    types = "text, text[], integer, integer, text, bigint, timestamptz"
    await db.execute(f"PREPARE claim({types}) AS {claim}")
    await db.execute("SET plan_cache_mode = force_generic_plan")
    nulls = ", ".join("NULL" for _ in range(len(names) + 1))
    plan = json.loads(await db.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE claim({nulls})"))
    indexes = {s.get("Index Name") for s in _scans(plan[0]["Plan"])}
    assert "jobs_claim_idx" not in indexes, plan
    assert "jobs_fair_claim_idx" in indexes, plan


def _claim_clause(sql: str, names: dict[str, str]) -> str:
    """A claim's `SET state = 'running', … updated_at = …`, its parameters and time named
    by `names`, its spacing and comments gone."""
    clause = sql[sql.index("SET state = 'running'") :]
    clause = re.sub(r"--[^\n]*", "", clause[: clause.index("\n", clause.index("updated_at = "))])
    for written, name in names.items():
        clause = clause.replace(written, name)
    return " ".join(clause.split())


async def test_a_fair_lease_sets_what_every_claim_sets(db: asyncpg.Connection) -> None:
    # jobq.lease_fair (migration 0044) writes out lease.sql's claim fragment: held to it
    source = await db.fetchval("SELECT prosrc FROM pg_proc WHERE proname = 'lease_fair'")
    names = {f"lease_fair.{name}": name for name in jobs_sql.LEASE_QUEUE.names}
    names["locked_at"] = "now"
    statement = jobs_sql.LEASE_QUEUE
    positional = {f"${n}": name for n, name in enumerate(statement.names, start=1)}
    positional["statement_timestamp()"] = "now"
    by_name = dict(sorted(positional.items(), key=lambda item: -len(item[0])))  # $10 first
    assert _claim_clause(source, names) == _claim_clause(statement.sql, by_name)


async def test_forgetting_an_idle_fair_key_reads_it_along_its_index(
    db: asyncpg.Connection,
) -> None:
    # jobq.forget_fair_key's probe (migration 0042): its plan, as the function runs it
    await _flooded_fair_queue(db)
    source = await db.fetchval("SELECT prosrc FROM pg_proc WHERE proname = 'forget_fair_key'")
    probe = source[source.index("(SELECT true") + 1 : source.index("LIMIT 1") + len("LIMIT 1")]
    probe = probe.replace("k.queue", "$1").replace("k.key", "$2")
    await db.execute(f"PREPARE probe(text, text) AS {probe}")
    await db.execute("SET plan_cache_mode = force_generic_plan")
    plan = json.loads(await db.fetchval("EXPLAIN (FORMAT JSON) EXECUTE probe('fair', 'Z')"))
    assert {s.get("Index Name") for s in _scans(plan[0]["Plan"])} == {"jobs_fair_claim_idx"}
