"""Running jobs' index without deduplication: a lease writes it cheaply again.

`jobs_running_idx` (queue, concurrency_key) holds one entry per running job, and in a
queue without concurrency keys every entry has the same key. B-tree deduplication
packs such entries into posting lists, and each lease then rewrote a posting list to
add its job (and dead entries piled up in them between vacuums): with it, the drain's
LEASE 100 + FINISH cost PostgreSQL 241k instructions per job, 224k without (counted
by `python -m bench.pg_calls`). Off, each entry is a tuple of its own, placed by its
heap address; the index is read the same way. Entries already merged stay merged until
their jobs finish and vacuum removes them: nothing to rebuild.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER INDEX jobq.jobs_running_idx SET (deduplicate_items = off)")


def downgrade() -> None:
    op.execute("ALTER INDEX jobq.jobs_running_idx RESET (deduplicate_items)")
