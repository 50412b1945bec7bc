"""Standard Webhooks signatures (https://www.standardwebhooks.com), made with the
`standardwebhooks` package: each request carries `webhook-id`, `webhook-timestamp`
and `webhook-signature`, an HMAC-SHA256 of `id.timestamp.body` per secret.

A target has one or two secrets (`Secrets`): while a secret is rotated, the request is
signed with both (the header lists both signatures, space-separated), so a receiver
holding either one accepts it; then the old one is dropped. Secrets are
`whsec_` + base64 of 24 to 64 random bytes (`new_secret()` makes one), as every Standard
Webhooks library expects.

A `Secrets` never shows its values: `repr` and `str` give the fingerprints (the first
hex digits of each secret's SHA-256), which is also what an API answer may show.

    secrets = Secrets.parse(["whsec_…", "whsec_…"])   # ValueError for a malformed one
    headers = sign(secrets, message_id, body)          # dict of the three headers
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets as random
from collections.abc import Iterable
from datetime import UTC, datetime

from standardwebhooks import Webhook

PREFIX = "whsec_"
MIN_SECRET_BYTES = 24
MAX_SECRET_BYTES = 64
NEW_SECRET_BYTES = 32
MAX_SECRETS = 2  # the current one and, while it is rotated in, the one before
FINGERPRINT_HEX_DIGITS = 8


def new_secret() -> str:
    """A fresh random secret in the `whsec_` form."""
    return PREFIX + base64.b64encode(random.token_bytes(NEW_SECRET_BYTES)).decode()


def _key(text: str) -> bytes:
    if not text.startswith(PREFIX):
        raise ValueError(f"a secret starts with {PREFIX!r}")
    try:
        key = base64.b64decode(text[len(PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a secret is whsec_ then base64") from None
    if not MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES:
        raise ValueError(
            f"a secret holds {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes, not {len(key)}"
        )
    return key


class Secrets:
    """A target's secrets, newest first; never shown."""

    __slots__ = ("_signers", "_texts")

    def __init__(self, texts: Iterable[str]) -> None:
        self._texts = tuple(texts)
        if not 1 <= len(self._texts) <= MAX_SECRETS:
            raise ValueError(f"a target has 1 to {MAX_SECRETS} secrets")
        if len(set(self._texts)) != len(self._texts):
            raise ValueError("a target's secrets differ")
        self._signers = tuple(Webhook(_key(text)) for text in self._texts)

    @classmethod
    def parse(cls, texts: Iterable[str]) -> Secrets:
        """The secrets `texts` (ValueError for a malformed one, or not 1 or 2 of them)."""
        return cls(texts)

    def reveal(self) -> tuple[str, ...]:
        """The secrets themselves, to store them (the one use)."""
        return self._texts

    def fingerprints(self) -> list[str]:
        """What may be shown of each secret: the first hex digits of its SHA-256."""
        return [fingerprint(text) for text in self._texts]

    def signature(self, message_id: str, timestamp: datetime, body: str) -> str:
        """The `webhook-signature` header: a `v1,…` signature per secret."""
        return " ".join(s.sign(message_id, timestamp, body) for s in self._signers)

    def __repr__(self) -> str:
        return f"Secrets({', '.join(self.fingerprints())})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secrets) and other.reveal() == self._texts

    def __hash__(self) -> int:
        return hash(self._texts)


def fingerprint(secret: str) -> str:
    """A secret's fingerprint: the first hex digits of its SHA-256."""
    return hashlib.sha256(secret.encode()).hexdigest()[:FINGERPRINT_HEX_DIGITS]


def sign(
    secrets: Secrets, message_id: str, body: str, *, at: datetime | None = None
) -> dict[str, str]:
    """The Standard Webhooks headers of a request whose body is `body`, sent now (or
    `at`), with the id `message_id` (the receiver's key to drop a repeated delivery)."""
    at = at or datetime.now(UTC)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": secrets.signature(message_id, at, body),
    }
