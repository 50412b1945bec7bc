"""API keys: minting them, and the store the CLI and the admin routes share.

A key reads `jobq_<lookup id>_<secret>`: 16 hex digits that find its row through a
unique index (no scan, and not secret), then 32 random bytes. The database keeps
SHA-256 of the whole key, never the key, and the digest is compared in constant time.
SHA-256 and not a slow hash (scrypt, argon2): slow hashes make guessing low-entropy
passwords expensive, but a 256-bit random secret cannot be guessed at any speed, and a
slow hash would spend milliseconds of CPU on every request that misses the cache — a
lever for anyone who wants to overload the service with made-up keys.

A key may be limited to some queues: exact names or patterns where `*` matches any run
of characters (`reports.*`). Admin keys cannot be limited: they can mint any key anyway.
What a new key may be granted is `KeyIn`'s rules, for the API and the CLI alike.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Sequence

import pydantic

from app.core.errors import KeyExists, KeyNotFound, ValidationFailed
from app.keys.repository import KeysRepository
from app.keys.rows import KeyRow
from app.keys.schemas import KeyIn
from app.keys.scopes import SCOPES

KEY_PREFIX = "jobq_"
LOOKUP_ID_BYTES = 8
SECRET_BYTES = 32
KEY_CREATE_RETRIES = 3

log = logging.getLogger("jobq.auth")


def digest(key: str) -> bytes:
    """What the database stores for a key."""
    return hashlib.sha256(key.encode()).digest()


def mint() -> tuple[str, str]:
    """A new key and its lookup id: 64 random bits to find it, 256 to prove it."""
    lookup_id = secrets.token_hex(LOOKUP_ID_BYTES)
    return f"{KEY_PREFIX}{lookup_id}_{secrets.token_urlsafe(SECRET_BYTES)}", lookup_id


def _grant(name: str, scopes: Sequence[str], queues: Sequence[str] | None) -> KeyIn:
    """The new key's name and grant, by `KeyIn`'s rules (`ValidationFailed` naming the field)."""
    try:
        return KeyIn.model_validate({"name": name, "scopes": scopes, "queues": queues})
    except pydantic.ValidationError as exc:
        raise ValidationFailed.of(exc.errors()) from None


class Keys:
    """Create, list and revoke keys (the CLI and the admin endpoints share this)."""

    def __init__(self, repo: KeysRepository) -> None:
        self._repo = repo

    async def create(
        self, name: str, scopes: Sequence[str], queues: Sequence[str] | None
    ) -> tuple[str, KeyRow]:
        """A new key, shown this once, and its stored row (which holds only a digest)."""
        grant = _grant(name, scopes, queues)
        scope_list = [s for s in SCOPES if s in grant.scopes]
        queue_list = None if grant.queues is None else list(dict.fromkeys(grant.queues))
        for _ in range(KEY_CREATE_RETRIES):
            key, lookup_id = mint()
            row = await self._repo.create(
                name=name,
                lookup_id=lookup_id,
                secret_hash=digest(key),
                scopes=scope_list,
                queues=queue_list,
            )
            if row is not None:
                log.info("created API key %r (%s…)", name, KEY_PREFIX + lookup_id)
                return key, row
            if await self._repo.get_by_name(name) is not None:
                raise KeyExists(f"an API key named {name!r} already exists", name=name)
            # 64 random bits collided with another key's lookup id: draw again.
        raise KeyExists("could not draw an unused lookup id; retry")

    async def list(self) -> list[KeyRow]:
        return await self._repo.list()

    async def revoke(self, name: str) -> KeyRow:
        """Revoke the key named `name` (again: no change); every replica is told."""
        row = await self._repo.revoke(name)
        if row is None:
            raise KeyNotFound(f"no API key is named {name!r}", name=name)
        log.info("revoked API key %r (%s…)", name, KEY_PREFIX + row.lookup_id)
        return row
