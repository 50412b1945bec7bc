"""Push targets: which queues are pushed, to what endpoint, and the checks a target
passes before it is kept (the allowlist, the secrets' form, the headers jobq sets).

A target's secrets are write-only: they are kept to sign with, and shown only as
fingerprints (`app.delivery.Secrets`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from app.core.errors import ValidationFailed
from app.delivery import Allowlist, Secrets
from app.push.params import KeepSecretsParams, SetPushTargetParams
from app.push.repository import PushRepository
from app.push.rows import PushTargetRow

DEFAULT_PUSH_TIMEOUT_SECONDS = 30.0
MAX_PUSH_TIMEOUT_SECONDS = 900.0
MAX_PUSH_HEADERS = 20
MAX_HEADER_VALUE_CHARS = 4096
# Headers a delivery sets itself: a target cannot send its own.
RESERVED_HEADERS = frozenset(
    {"host", "content-type", "content-length", "transfer-encoding", "connection",
     "webhook-id", "webhook-timestamp", "webhook-signature"}
)  # fmt: skip
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


@dataclass(frozen=True, slots=True)
class PushTarget:
    """Where a pushed queue's jobs go."""

    queue: str
    url: str
    secrets: Secrets
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: float = DEFAULT_PUSH_TIMEOUT_SECONDS

    @property
    def breaker(self) -> str:
        """The target's key among the delivery breakers."""
        return breaker_key(self.queue)

    @classmethod
    def of(cls, row: PushTargetRow) -> PushTarget:
        return cls(
            queue=row.queue,
            url=row.url,
            secrets=Secrets(row.secrets),
            headers=row.headers,
            timeout_seconds=row.timeout_seconds,
        )


def breaker_key(queue: str) -> str:
    """A pushed queue's key among the delivery breakers (`app.delivery.Breakers`)."""
    return f"queue:{queue}"


@dataclass(frozen=True, slots=True)
class TargetChange:
    """A target as an operator sets it: `secrets` None keeps the current ones."""

    url: str
    secrets: list[str] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: float = DEFAULT_PUSH_TIMEOUT_SECONDS


def _headers(headers: Mapping[str, str], at: tuple[str | int, ...]) -> dict[str, str]:
    if len(headers) > MAX_PUSH_HEADERS:
        raise ValidationFailed.field(at, f"at most {MAX_PUSH_HEADERS} headers", "too_long")
    checked = {}
    for name, value in headers.items():
        if not _TOKEN.match(name) or name.lower() in RESERVED_HEADERS:
            raise ValidationFailed.field(
                (*at, name), "not a header name a target may set", "value_error"
            )
        if len(value) > MAX_HEADER_VALUE_CHARS or any(c in value for c in "\r\n\0"):
            raise ValidationFailed.field((*at, name), "not a header value", "value_error")
        checked[name] = value
    return checked


class PushTargets:
    """Read, set and clear pushed queues' targets."""

    def __init__(self, repo: PushRepository, allowlist: Allowlist) -> None:
        self._repo = repo
        self._allowlist = allowlist

    async def get(self, queue: str) -> PushTarget | None:
        """The queue's target; None: the queue is pulled."""
        row = await self._repo.get(queue)
        return None if row is None else PushTarget.of(row)

    async def all(self) -> list[PushTarget]:
        return [PushTarget.of(row) for row in await self._repo.all()]

    async def check(
        self, queue: str, change: TargetChange, at: tuple[str | int, ...] = ("push",)
    ) -> None:
        """Raise what `set` would refuse, changing nothing: a caller that changes other
        settings with the target changes them first, then sets it."""
        self._checked(change, at)
        if change.secrets is None and await self._repo.get(queue) is None:
            raise _secrets_needed(at)

    async def set(
        self, queue: str, change: TargetChange, at: tuple[str | int, ...] = ("push",)
    ) -> PushTarget:
        """Push the queue to the target `change` describes (checked against the
        allowlist: TargetNotAllowed; its fields: ValidationFailed, named from `at`)."""
        headers, secrets = self._checked(change, at)
        if secrets is None:
            keep = KeepSecretsParams(queue, change.url, headers, change.timeout_seconds)
            row = await self._repo.set_keeping_secrets(keep)
            if row is None:
                raise _secrets_needed(at)
            return PushTarget.of(row)
        params = SetPushTargetParams(
            queue, change.url, headers, change.timeout_seconds, list(secrets.reveal())
        )
        return PushTarget.of(await self._repo.set(params))

    def _checked(
        self, change: TargetChange, at: tuple[str | int, ...]
    ) -> tuple[str, Secrets | None]:
        """The target's headers (as JSON) and secrets (None: keep the current ones),
        after the checks that need no database."""
        self._allowlist.check(change.url)
        if not (0 < change.timeout_seconds <= MAX_PUSH_TIMEOUT_SECONDS) or not math.isfinite(
            change.timeout_seconds
        ):
            raise ValidationFailed.field(
                (*at, "timeout_seconds"),
                f"between 0 and {MAX_PUSH_TIMEOUT_SECONDS:g} seconds",
                "value_error",
            )
        headers = json.dumps(_headers(change.headers, (*at, "headers")))
        if change.secrets is None:
            return headers, None
        try:
            return headers, Secrets.parse(change.secrets)
        except ValueError as exc:
            raise ValidationFailed.field((*at, "secrets"), str(exc), "value_error") from None

    async def clear(self, queue: str) -> bool:
        """Make the queue pulled; whether it was pushed."""
        return await self._repo.clear(queue)


def _secrets_needed(at: tuple[str | int, ...]) -> ValidationFailed:
    """A target sent without secrets for a queue that has none to keep."""
    return ValidationFailed.field((*at, "secrets"), "a new target needs its secrets", "missing")
