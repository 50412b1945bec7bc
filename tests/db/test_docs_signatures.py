"""docs/workflows/transactional.md shows the SQL functions' signatures as the migrated
database has them, so a parameter added to `jobq.enqueue` appears there."""

from __future__ import annotations

import asyncpg

from tests.docs_tables import (
    DOCUMENTED_FUNCTIONS,
    SIGNATURES_QUERY,
    TRANSACTIONAL,
    current_signatures,
    signature_block,
)


async def test_the_transactional_page_shows_the_functions_as_the_database_has_them(
    db: asyncpg.Connection,
) -> None:
    rows = await db.fetch(SIGNATURES_QUERY, list(DOCUMENTED_FUNCTIONS))
    assert [row[0] for row in rows] == list(DOCUMENTED_FUNCTIONS)
    fresh = signature_block((row[0], row[1], row[2]) for row in rows)
    assert "concurrency_key text DEFAULT NULL" in fresh  # what the page once left out
    documented = current_signatures(TRANSACTIONAL.read_text(encoding="utf-8"))
    assert documented == fresh, (
        "docs/workflows/transactional.md's signatures differ from the database's; "
        f"put this between its sql-signatures markers:\n{fresh}"
    )
