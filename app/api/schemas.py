"""The shapes every part of the API shares: errors, and the health answer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class Health(BaseModel):
    status: Literal["ok"]


class Problem(BaseModel):
    """An error, as RFC 9457 problem details with a stable machine `code`."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "type": "urn:jobq:problem:lease_lost",
                    "title": "Lease lost",
                    "status": 409,
                    "detail": "the job is now queued",
                    "code": "lease_lost",
                    "job_id": 42,
                    "state": "queued",
                }
            ]
        },
        extra="allow",
    )

    type: str
    title: str
    status: int
    detail: str
    code: str
    errors: list[dict[str, Any]] | None = None
