"""Typed rows of the audit log's named SQL: fields are the statement's columns in order."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple


class AuditRow(NamedTuple):
    """An entry of the audit log: every column of `jobq.audit_log`, in order."""

    id: int
    at: datetime
    key_name: str | None
    action: str
    method: str
    path: str
    queue: str | None
    job_id: int | None
    target: str | None
    detail: dict[str, Any]
    status: int
    request_id: str
