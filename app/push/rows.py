"""The rows the push targets' named SQL answers."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class PushTargetRow(NamedTuple):
    """A pushed queue's target as `jobq.push_targets` holds it."""

    queue: str
    url: str
    headers: dict[str, str]
    timeout_seconds: float
    secrets: list[str]
    updated_at: datetime
