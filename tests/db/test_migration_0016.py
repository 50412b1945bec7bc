"""Migration 0016 moves a succeeded job's last attempt record into its columns, and back."""

from __future__ import annotations

import json
import os
from datetime import datetime

import asyncpg
from alembic import command
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from app.db.embedded import quote_ident
from app.db.migrate import alembic_config, upgrade
from app.db.url import async_url, with_database
from tests.conftest import plain

BEFORE = "0015"


async def test_upgrade_moves_the_last_success_into_the_row_and_downgrade_moves_it_back(
    server_url: str,
) -> None:
    name = f"jobq_migration_{os.getpid()}"
    admin = await asyncpg.connect(plain(with_database(server_url, "postgres")))
    await admin.execute(f"DROP DATABASE IF EXISTS {quote_ident(name)} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {quote_ident(name)}")
    url = with_database(server_url, name)
    try:
        await upgrade(url, BEFORE)
        conn = await asyncpg.connect(plain(url))
        try:
            # As 0015 left them: a success after a failure, its worker cleared, and a
            # job that failed for good.
            history = [
                {"attempt": 1, "lease_id": "00000000-0000-0000-0000-000000000001",
                 "worker_id": "w1", "key_id": None, "started_at": "2026-11-24T10:00:00+00:00",
                 "finished_at": "2026-11-24T10:00:01+00:00", "outcome": "failed",
                 "error": {"type": "E", "message": "boom", "details": None}},
                {"attempt": 2, "lease_id": "00000000-0000-0000-0000-000000000002",
                 "worker_id": "w2", "key_id": 7, "started_at": "2026-11-24T10:01:00+00:00",
                 "finished_at": "2026-11-24T10:01:02+00:00", "outcome": "succeeded",
                 "error": None},
            ]  # fmt: skip
            await conn.execute(
                """
                INSERT INTO jobq.jobs (queue, type, payload, state, attempt, max_attempts,
                                       lease_seconds, lease_id, lease_key_id, attempted_at,
                                       finished_at, attempts)
                VALUES ('q', 't', '{}', 'succeeded', 2, 3, 30,
                        '00000000-0000-0000-0000-000000000002', 7,
                        '2026-11-24T10:01:00+00:00', '2026-11-24T10:01:02+00:00', $1::jsonb),
                       ('q', 't', '{}', 'failed', 1, 1, 30,
                        '00000000-0000-0000-0000-000000000001', NULL,
                        '2026-11-24T10:00:00+00:00', '2026-11-24T10:00:01+00:00', $2::jsonb)
                """,
                json.dumps(history),
                json.dumps(history[:1]),
            )
        finally:
            await conn.close()

        await upgrade(url)
        conn = await asyncpg.connect(plain(url))
        try:
            await conn.execute("SET TIME ZONE 'UTC'")
            rows = await conn.fetch(
                "SELECT worker_id, attempts, jobq.attempts_of(j) AS full"
                " FROM jobq.jobs j ORDER BY id"
            )
            succeeded, failed = rows
            assert succeeded["worker_id"] == "w2"
            assert json.loads(succeeded["attempts"]) == history[:1]
            assert _same(json.loads(succeeded["full"]), history)
            assert failed["worker_id"] is None and json.loads(failed["full"]) == history[:1]
        finally:
            await conn.close()

        await downgrade(url, BEFORE)
        conn = await asyncpg.connect(plain(url))
        try:
            await conn.execute("SET TIME ZONE 'UTC'")
            rows = await conn.fetch("SELECT worker_id, attempts FROM jobq.jobs ORDER BY id")
            assert rows[0]["worker_id"] is None
            assert _same(json.loads(rows[0]["attempts"]), history)
            assert json.loads(rows[1]["attempts"]) == history[:1]
        finally:
            await conn.close()
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {quote_ident(name)} WITH (FORCE)")
        await admin.close()


async def downgrade(url: str, revision: str) -> None:
    """Alembic's downgrade to `revision`, as app.db.migrate.upgrade runs its upgrade."""

    def run(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, revision)

    engine = create_async_engine(async_url(url), poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(run)
            await conn.commit()
    finally:
        await engine.dispose()


def _same(got: list[dict[str, object]], want: list[dict[str, object]]) -> bool:
    """Records equal, times compared as instants (PostgreSQL writes them its own way)."""

    def norm(records: list[dict[str, object]]) -> list[dict[str, object]]:
        return [
            {k: datetime.fromisoformat(v) if k.endswith("_at") and isinstance(v, str) else v
             for k, v in r.items()}
            for r in records
        ]  # fmt: skip

    return norm(got) == norm(want)
