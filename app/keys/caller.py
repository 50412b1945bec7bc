"""Who is calling: an API key's scopes and queues, or nobody in particular when the
service runs open. Every domain's routes check their caller through this."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.core.errors import Forbidden
from app.keys.rows import KeyRow
from app.keys.scopes import SCOPES, Scope


@dataclass(frozen=True, slots=True)
class QueueRule:
    """The queues a key may touch: exact names, and patterns with `*`."""

    entries: tuple[str, ...]
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = ("|".join(".*".join(map(re.escape, e.split("*"))) for e in self.entries)) or "(?!)"
        object.__setattr__(self, "_regex", re.compile(f"(?:{parts})"))

    def allows(self, queue: str) -> bool:
        return self._regex.fullmatch(queue) is not None

    def sql(self) -> tuple[list[str], list[str]]:
        """(exact names, LIKE patterns) for the list statement."""
        names = [e for e in self.entries if "*" not in e]
        patterns = [
            e.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_").replace("*", "%")
            for e in self.entries
            if "*" in e
        ]
        return names, patterns


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: an API key, or nobody in particular when the service runs open."""

    key_id: int | None
    name: str | None
    scopes: frozenset[str]
    queues: QueueRule | None  # None: every queue

    def can(self, scope: Scope) -> bool:
        return "admin" in self.scopes or scope in self.scopes

    def require(self, scope: Scope) -> None:
        if not self.can(scope):
            raise Forbidden(f"this API key lacks the {scope!r} scope")

    def may_use(self, queue: str) -> bool:
        return self.queues is None or self.queues.allows(queue)

    def require_queues(self, queues: Iterable[str]) -> None:
        """`Forbidden` unless the key may touch every one of `queues`."""
        refused = sorted({q for q in queues if not self.may_use(q)})
        if refused:
            raise Forbidden(
                f"this API key may not use the queue(s) {', '.join(refused)}", queues=refused
            )

    def require_queue_of(self, queue: str, what: str) -> None:
        """`Forbidden` unless the key may touch `queue`, the queue of a job or schedule
        the caller named by id or name: the answer does not name that queue."""
        if not self.may_use(queue):
            raise Forbidden(f"this API key may not use the queue of that {what}")


OPEN = Caller(key_id=None, name=None, scopes=frozenset(SCOPES), queues=None)


def caller_from(row: KeyRow) -> Caller:
    return Caller(
        key_id=row.id,
        name=row.name,
        scopes=frozenset(row.scopes),
        queues=None if row.queues is None else QueueRule(tuple(row.queues)),
    )
