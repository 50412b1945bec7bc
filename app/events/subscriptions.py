"""Event subscriptions' rules (the admin API's service): a subscription's URL must be
allowed by `JOBQ_PUSH_ALLOWED_TARGETS`, its secrets are Standard Webhooks secrets (one
made for it when none is given; never shown again, only fingerprints), a new one
starts after the last event now, and its breaker is the delivery breaker of
`subscription:<name>`."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.errors import SubscriptionNotFound, ValidationFailed
from app.delivery import Allowlist, Breakers, BreakerState, Secrets, new_secret
from app.events.params import PutSubscriptionParams
from app.events.repository import SubscriptionsRepository
from app.events.rows import SubscriptionRow


def breaker_key(name: str) -> str:
    """The delivery breaker of a subscription (`app.delivery.breaker`'s naming)."""
    return f"subscription:{name}"


@dataclass(frozen=True, slots=True)
class Definition:
    """What an operator sets (None filters: everything)."""

    url: str
    queues: list[str] | None = None
    types: list[str] | None = None
    kinds: list[str] | None = None
    secrets: list[str] | None = None  # None: made for it (new), or kept (replaced)
    paused: bool = False


@dataclass(frozen=True, slots=True)
class Subscription:
    """A subscription with its breaker, and the secret made for it (shown once)."""

    row: SubscriptionRow
    breaker: BreakerState
    new_secret: str | None = None


class Subscriptions:
    """Creates, reads and deletes event subscriptions."""

    def __init__(
        self, repo: SubscriptionsRepository, allowlist: Allowlist, breakers: Breakers
    ) -> None:
        self._repo = repo
        self._allowlist = allowlist
        self._breakers = breakers

    async def put(self, name: str, definition: Definition) -> tuple[Subscription, bool]:
        """The subscription as stored, and whether it was created."""
        self._allowlist.check(definition.url)  # TargetNotAllowed (422)
        if definition.secrets is not None:
            try:
                Secrets.parse(definition.secrets)
            except ValueError as exc:
                raise ValidationFailed.field(("secrets",), str(exc), "value_error") from None
        made = new_secret()
        row, created = await self._repo.put(
            PutSubscriptionParams(
                name=name,
                url=definition.url,
                queues=definition.queues,
                types=definition.types,
                kinds=definition.kinds,
                secrets=definition.secrets,
                new_secret=made,
                paused=definition.paused,
            )
        )
        shown = made if created and definition.secrets is None else None
        return await self._with_breaker(row, shown), created

    async def get(self, name: str) -> Subscription:
        row = await self._repo.get(name)
        if row is None:
            raise SubscriptionNotFound()
        return await self._with_breaker(row)

    async def all(self) -> list[Subscription]:
        rows = await self._repo.all()
        states = await self._breakers.states([breaker_key(r.name) for r in rows])
        return [Subscription(r, states[breaker_key(r.name)]) for r in rows]

    async def delete(self, name: str) -> None:
        if not await self._repo.delete(name):
            raise SubscriptionNotFound()

    async def reset(self, name: str) -> Subscription:
        """Close the subscription's breaker: its deliveries resume at once."""
        row = await self._repo.get(name)
        if row is None:
            raise SubscriptionNotFound()
        return Subscription(row, await self._breakers.reset(breaker_key(name)))

    async def _with_breaker(self, row: SubscriptionRow, shown: str | None = None) -> Subscription:
        key = breaker_key(row.name)
        return Subscription(row, (await self._breakers.states([key]))[key], shown)
