"""The rows the keys repository hands back."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class KeyRow(NamedTuple):
    """An API key as stored (every column of `jobq.api_keys`, in order): never the key,
    only its SHA-256 digest."""

    id: int
    name: str
    lookup_id: str
    secret_hash: bytes
    scopes: list[str]
    queues: list[str] | None
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None
