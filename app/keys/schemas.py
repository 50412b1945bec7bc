"""The JSON shapes of API keys."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from app.api.types import Name, Strict
from app.core.names import MAX_NAME_LENGTH, QUEUE_RULE_PATTERN
from app.keys.scopes import Scope

QueuePattern = Annotated[
    str,
    StringConstraints(pattern=QUEUE_RULE_PATTERN, max_length=MAX_NAME_LENGTH),
    Field(description="A queue name, or a pattern where `*` matches any run of characters."),
]


class KeyIn(Strict):
    """An API key to create."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"name": "ingest", "scopes": ["enqueue"], "queues": ["emails", "reports.*"]}
            ]
        }
    )

    name: Name
    scopes: list[Scope] = Field(min_length=1, max_length=4)
    queues: list[QueuePattern] | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="The queues the key may touch; omitted: every queue. Not for admin keys.",
    )

    @model_validator(mode="after")
    def _admin_everywhere(self) -> KeyIn:
        if "admin" in self.scopes and self.queues is not None:
            raise ValueError("admin keys cannot be limited to queues")
        return self


class KeyOut(BaseModel):
    """An API key as stored: never the key itself, which is shown once, at creation."""

    name: str
    prefix: str = Field(description="The key's first characters, `jobq_<lookup id>`.")
    scopes: list[Scope]
    queues: list[str] | None
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None = Field(description="To within a minute.")


class KeyCreated(KeyOut):
    """The new key. `key` is shown this once: store it now."""

    key: str


class KeysOut(BaseModel):
    keys: list[KeyOut]
