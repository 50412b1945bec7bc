"""Delivery: what jobq needs to send requests to its users' HTTP endpoints, shared by
push queues and event subscriptions. Each part's module docstring shows its use.

- `Allowlist` (`allowlist`): the targets `JOBQ_PUSH_ALLOWED_TARGETS` allows, and the
  address check against SSRF (no loopback, link-local or private address unless a
  pattern names the host); raises `app.core.errors.TargetNotAllowed`.
- `Secrets`, `sign`, `new_secret`, `fingerprint` (`signing`): Standard Webhooks
  signatures with one or two secrets per target (rotation); a `Secrets` never shows
  its values, only fingerprints.
- `create_transport`, `send`, `Attempt`, `retry_after` (`client`): an httpx transport
  and one POST through it that follows no redirect, keeps no cookie and connects only
  to checked addresses, as an `Attempt` (status, body read up to a bound, latency,
  failure kind, Retry-After).
- `Breakers`, `BreakerState` (`breaker`): a circuit breaker per target key, in
  PostgreSQL (`jobq.delivery_breakers`), so every replica holds back alike.
"""

from app.delivery.allowlist import Allowlist, Pattern, Permit
from app.delivery.breaker import Breakers, BreakerState
from app.delivery.client import Attempt, create_transport, retry_after, send
from app.delivery.repository import DeliveryRepository
from app.delivery.signing import Secrets, fingerprint, new_secret, sign

__all__ = [
    "Allowlist",
    "Attempt",
    "BreakerState",
    "Breakers",
    "DeliveryRepository",
    "Pattern",
    "Permit",
    "Secrets",
    "create_transport",
    "fingerprint",
    "new_secret",
    "retry_after",
    "send",
    "sign",
]
