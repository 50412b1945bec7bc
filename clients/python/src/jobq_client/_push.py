"""Receiving push deliveries: `verify_delivery` checks a request jobq POSTed to your
endpoint (Standard Webhooks signature and timestamp, with the `standardwebhooks`
package) and gives its envelope.

    delivery = verify_delivery(await request.body(), request.headers, SECRETS)
    result = handle(delivery.type, delivery.payload)
    return result            # a 2xx with a JSON body completes the job with it
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError

from jobq_client._models import _required_time


class InvalidDelivery(ValueError):
    """The request is not a delivery signed with one of the secrets, or it is too old
    or too new (more than five minutes from now: a replay). Answer it 4xx."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """A job jobq pushed to your endpoint. `lease_id` finishes it later (after a 202),
    through the ordinary calls (`Client.complete`, `Client.fail`, `Client.heartbeat`)."""

    job_id: int
    queue: str
    type: str
    payload: Any
    attempt: int
    max_attempts: int
    lease_id: str
    lease_expires_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
    parents: list[dict[str, Any]] = field(default_factory=list)
    message_id: str = ""  # `webhook-id`: the same for a repeated delivery of one attempt

    @classmethod
    def from_json(cls, data: dict[str, Any], message_id: str = "") -> Delivery:
        return cls(
            job_id=data["job_id"],
            queue=data["queue"],
            type=data["type"],
            payload=data.get("payload"),
            attempt=data["attempt"],
            max_attempts=data["max_attempts"],
            lease_id=data["lease_id"],
            lease_expires_at=_required_time(data["lease_expires_at"]),
            metadata=data.get("metadata") or {},
            parents=list(data.get("parents") or []),
            message_id=message_id,
        )


def verify_delivery(
    body: bytes | str, headers: Mapping[str, str], secrets: str | Sequence[str]
) -> Delivery:
    """The delivery in `body`, once its signature checks out with one of `secrets`
    (`whsec_…`; give both while rotating) and its timestamp is recent; else
    `InvalidDelivery`."""
    text = body.decode() if isinstance(body, bytes) else body
    plain = {name.lower(): value for name, value in headers.items()}
    for secret in [secrets] if isinstance(secrets, str) else secrets:
        try:
            data = Webhook(secret).verify(text, plain)
        except WebhookVerificationError as exc:
            error: Exception = exc
            continue
        if not isinstance(data, dict):
            raise InvalidDelivery("the body is not a delivery")
        try:
            return Delivery.from_json(data, plain.get("webhook-id", ""))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidDelivery(f"the body is not a delivery: {exc}") from None
    raise InvalidDelivery(str(error) if secrets else "no secret to verify with")
