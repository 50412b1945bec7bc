"""The JSON shapes of push targets: what an operator sends in a queue's settings
(`push`), and what any answer shows of a target (never its secrets)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.api.types import JsonNumber, Percentiles, Strict
from app.push.service.targets import (
    DEFAULT_PUSH_TIMEOUT_SECONDS,
    MAX_HEADER_VALUE_CHARS,
    MAX_PUSH_HEADERS,
    MAX_PUSH_TIMEOUT_SECONDS,
)

MAX_URL_CHARS = 2048
Secret = Annotated[str, StringConstraints(pattern=r"^whsec_[A-Za-z0-9+/=]+$", max_length=200)]


class PushTargetIn(Strict):
    """Where a pushed queue's jobs are POSTed. `secrets` (Standard Webhooks, `whsec_…`):
    one, or two while rotating (each request is signed with both); left out, the
    current ones stay."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "url": "https://jobs.example.com/hooks/jobq",
                    "secrets": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
                    "headers": {"x-env": "production"},
                    "timeout_seconds": 30,
                }
            ]
        }
    )

    url: Annotated[str, StringConstraints(min_length=1, max_length=MAX_URL_CHARS)] = Field(
        description="The endpoint, `http` or `https`; it must match JOBQ_PUSH_ALLOWED_TARGETS."
    )
    secrets: Annotated[list[Secret], Field(min_length=1, max_length=2)] | None = Field(
        default=None, description="Signing secrets, newest first; never shown again."
    )
    headers: Annotated[
        dict[str, Annotated[str, StringConstraints(max_length=MAX_HEADER_VALUE_CHARS)]],
        Field(max_length=MAX_PUSH_HEADERS),
    ] = Field(default_factory=dict, description="Headers added to each delivery.")
    timeout_seconds: Annotated[float, Field(gt=0, le=MAX_PUSH_TIMEOUT_SECONDS), JsonNumber] = Field(
        default=DEFAULT_PUSH_TIMEOUT_SECONDS,
        description="Each delivery's deadline, connection to the answer's last byte.",
    )


class PushTargetOut(BaseModel):
    """A pushed queue's target, as any answer shows it: its headers by name, its
    secrets by fingerprint (the first hex digits of each one's SHA-256)."""

    url: str
    header_names: list[str]
    timeout_seconds: float
    secret_fingerprints: list[str]


class BreakerOut(BaseModel):
    """A target's circuit breaker: `open` holds deliveries back until `open_until`;
    `half_open`: a pause is over, the next failure opens it again for twice as long."""

    state: Literal["closed", "open", "half_open"]
    failures: int = Field(description="Consecutive failed deliveries.")
    trips: int = Field(description="Times it opened since the last success.")
    open_until: datetime | None
    failed_at: datetime | None
    last_error: str | None = Field(description="The last failure: its class and excerpt.")


class PushHealthOut(BaseModel):
    """A pushed queue's target and the health of its deliveries."""

    queue: str
    target: PushTargetOut
    breaker: BreakerOut


class DeliveryWindow(BaseModel):
    """A pushed queue's deliveries over a window, every replica's."""

    deliveries: int
    classes: dict[str, int] = Field(
        description="Deliveries by outcome: `2xx` (not 202), `202` (accepted, finished "
        "later), `retry_later` (429 or 503), `4xx`, `5xx`, `timeout`, `connection` (no "
        "answer), `refused` (the allowlist), `too_large` (the answer's body)."
    )
    latency_seconds: Percentiles = Field(
        description="From the request's start to the answer's end (within 19 %: read from "
        "duration buckets); null without a delivery."
    )


class PushBreakerState(BaseModel):
    state: Literal["closed", "open", "half_open"]
    open_until: datetime | None = Field(description="When an open breaker lets deliveries by.")


class PushDeliveriesOut(BaseModel):
    """A pushed queue's deliveries of the last minute and hour, and its breaker."""

    target_host: str = Field(description="The target URL's host (the rest is in its settings).")
    last_minute: DeliveryWindow
    last_hour: DeliveryWindow
    breaker: PushBreakerState
