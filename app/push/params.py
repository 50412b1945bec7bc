"""The parameters of the push targets' named SQL (`queries.sql`; see `app.db.statement`)."""

from __future__ import annotations

from typing import NamedTuple


class ByQueue(NamedTuple):
    queue: str


class SetPushTargetParams(NamedTuple):
    queue: str
    url: str
    headers: str  # a JSON object, as text
    timeout_seconds: float
    secrets: list[str]


class KeepSecretsParams(NamedTuple):
    """`set_push_target_keeping_secrets`: the target's fields but its secrets."""

    queue: str
    url: str
    headers: str
    timeout_seconds: float
