"""The audit log's shapes: a page of entries as `GET /v1/audit` answers it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_AUDIT_PAGE = 100
MAX_AUDIT_PAGE = 500
ACTION_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,127}$"  # an operation id


class AuditEntryOut(BaseModel):
    """One admin action, or a refused attempt at one."""

    id: int = Field(description="The entry's place in the log: later entries have larger ids.")
    at: datetime
    key: str | None = Field(
        description="The API key's name (also of a revoked key, or of a key sent with a "
        "wrong secret); null when the service runs open (no key) or the token named no key."
    )
    action: str = Field(description="The route's operation id (`purgeQueue`, `createKey`, …).")
    method: str
    path: str
    queue: str | None = Field(description="The queue the request named, if any.")
    job_id: int | None = Field(description="The job the request named, if any.")
    target: str | None = Field(
        description="The key, schedule or subscription the request named, if any."
    )
    detail: dict[str, Any] = Field(
        description="What the request's body asked for: its fields, their numbers and "
        "flags, and the text of fields that name things; never payloads, URLs, headers "
        'or secrets (shown as "[not recorded]").'
    )
    status: int = Field(description="The HTTP status of the answer (401 and 403: refused).")
    request_id: str = Field(description="The request's `X-Request-ID`, as the access log has it.")


class AuditPage(BaseModel):
    """Entries newest first; pass `next_before` as `before` for the next (older) page."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "entries": [
                        {
                            "id": 42,
                            "at": "2026-11-28T19:02:11.204000Z",
                            "key": "ops",
                            "action": "setQueueSettings",
                            "method": "PUT",
                            "path": "/v1/queues/emails/settings",
                            "queue": "emails",
                            "job_id": None,
                            "target": None,
                            "detail": {"max_running": 5, "ordering": "fifo"},
                            "status": 200,
                            "request_id": "3f1c2a9be0d54b7c8a1f6e2d9b0c4a7e",
                        },
                        {
                            "id": 41,
                            "at": "2026-11-28T19:01:57.880000Z",
                            "key": "reader",
                            "action": "purgeQueue",
                            "method": "POST",
                            "path": "/v1/queues/emails/purge",
                            "queue": "emails",
                            "job_id": None,
                            "target": None,
                            "detail": {},
                            "status": 403,
                            "request_id": "9d2e7c1a4b3f40e6a5c8d7b6e1f0a2c3",
                        },
                    ],
                    "next_before": None,
                }
            ]
        }
    )

    entries: list[AuditEntryOut]
    next_before: int | None = Field(
        description="The last entry's id when the page is full: more may be older."
    )
