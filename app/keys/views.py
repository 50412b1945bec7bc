"""API keys as the API shows them."""

from __future__ import annotations

from typing import Any

from app.keys.rows import KeyRow
from app.keys.service import KEY_PREFIX


def key(row: KeyRow) -> dict[str, Any]:
    """`KeyOut`: its digest stays in the database."""
    return {
        "name": row.name,
        "prefix": KEY_PREFIX + row.lookup_id,
        "scopes": row.scopes,
        "queues": row.queues,
        "created_at": row.created_at,
        "revoked_at": row.revoked_at,
        "last_used_at": row.last_used_at,
    }
