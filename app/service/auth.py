"""API keys: minting, verifying, and what each key may do. Knows nothing of HTTP.

A key reads `jobq_<lookup id>_<secret>`: 16 hex digits that find its row through a
unique index (no scan, and not secret), then 32 random bytes. The database keeps
SHA-256 of the whole key, never the key, and the digest is compared in constant time.
SHA-256 and not a slow hash (scrypt, argon2): slow hashes make guessing low-entropy
passwords expensive, but a 256-bit random secret cannot be guessed at any speed, and a
slow hash would spend milliseconds of CPU on every request that misses the cache — a
lever for anyone who wants to overload the service with made-up keys.

Scopes: `enqueue` (create jobs), `work` (lease, heartbeat, complete, fail, ack), `read`
(get and list jobs), `admin` (all of them, and key management). A key may be limited to
some queues: exact names or patterns where `*` matches any run of characters
(`reports.*`). Admin keys cannot be limited: they can mint any key anyway.

`Authenticator` answers "who is calling?" for every request. In `auto` mode a service
listening on loopback only runs open (every caller may do everything) until the first
key is created; once one exists — revoked keys count — keys are required for good.
Verified keys are cached for `cache_seconds`; creating and revoking a key NOTIFYs every
replica, which drops its cache at once, and while a replica's LISTEN connection is down
it trusts no cache and asks the database on every request. So a revoked key stops
working on the replica that revoked it before the answer is sent, and elsewhere as soon
as the notification arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast, get_args

from app.core.errors import (
    DatabaseUnavailable,
    Forbidden,
    KeyExists,
    KeyNotFound,
    Unauthorized,
    ValidationFailed,
)
from app.db.repository import JobsRepository, Row

Scope = Literal["enqueue", "work", "read", "admin"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
KEY_PREFIX = "jobq_"
LOOKUP_ID_BYTES = 8
SECRET_BYTES = 32
KEY_CREATE_RETRIES = 3
TOUCH_INTERVAL_SECONDS = 60.0
# Queue names, plus `*` for any run of characters.
QUEUE_PATTERN = r"^[A-Za-z0-9_.:*-]{1,128}$"
MAX_KEY_QUEUES = 100

_KEY_FORMAT = re.compile(r"^jobq_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
_QUEUE_PATTERN = re.compile(QUEUE_PATTERN)
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")

log = logging.getLogger("jobq.auth")
T = TypeVar("T")


class AuthRequired(Exception):
    """The service would be open to the network: no API key exists and it does not listen
    on loopback only."""


def open_network_refusal(host: str) -> str:
    """Why jobq will not start on `host` with no API key."""
    return (
        f"jobq listens on {host}, beyond loopback, and no API key exists: create one first "
        "(`jobq keys create --name admin --scopes admin`), or set JOBQ_AUTH=disabled to "
        "serve without authentication"
    )


def digest(key: str) -> bytes:
    """What the database stores for a key."""
    return hashlib.sha256(key.encode()).digest()


def mint() -> tuple[str, str]:
    """A new key and its lookup id: 64 random bits to find it, 256 to prove it."""
    lookup_id = secrets.token_hex(LOOKUP_ID_BYTES)
    return f"{KEY_PREFIX}{lookup_id}_{secrets.token_urlsafe(SECRET_BYTES)}", lookup_id


def is_loopback(host: str | None) -> bool:
    """Is this address (or `localhost`) reachable from this machine only?"""
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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


OPEN = Caller(key_id=None, name=None, scopes=frozenset(SCOPES), queues=None)


def caller_from(row: Row) -> Caller:
    queues = row["queues"]
    return Caller(
        key_id=row["id"],
        name=row["name"],
        scopes=frozenset(row["scopes"]),
        queues=None if queues is None else QueueRule(tuple(queues)),
    )


def check_grant(
    scopes: Sequence[str], queues: Sequence[str] | None
) -> tuple[list[str], list[str] | None]:
    """Validated, de-duplicated scopes and queues for a new key (`ValidationFailed` if not)."""
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown or not scopes:
        raise ValidationFailed.field(
            ("body", "scopes"),
            f"give one or more of {', '.join(SCOPES)}"
            + (f" (unknown: {', '.join(unknown)})" if unknown else ""),
            "value_error",
        )
    if queues is not None:
        bad = [q for q in queues if not _QUEUE_PATTERN.match(q)]
        if bad or not queues or len(queues) > MAX_KEY_QUEUES:
            raise ValidationFailed.field(
                ("body", "queues"),
                f"give 1..{MAX_KEY_QUEUES} queue names or patterns such as 'reports.*'",
                "value_error",
            )
        if "admin" in scopes:
            raise ValidationFailed.field(
                ("body", "queues"), "admin keys cannot be limited to queues", "value_error"
            )
    ordered: list[str] = [s for s in SCOPES if s in scopes]
    return ordered, None if queues is None else list(dict.fromkeys(queues))


class Keys:
    """Create, list and revoke keys (the CLI and the admin endpoints share this)."""

    def __init__(self, repo: JobsRepository) -> None:
        self._repo = repo

    async def create(
        self, name: str, scopes: Sequence[str], queues: Sequence[str] | None
    ) -> tuple[str, Row]:
        """A new key, shown this once, and its stored row (which holds only a digest)."""
        if not _QUEUE_NAME.match(name):
            raise ValidationFailed.field(
                ("body", "name"), "1-128 letters, digits and _ . : - (not first)", "value_error"
            )
        scope_list, queue_list = check_grant(scopes, queues)
        for _ in range(KEY_CREATE_RETRIES):
            key, lookup_id = mint()
            row = await self._repo.create_key(
                name=name,
                lookup_id=lookup_id,
                secret_hash=digest(key),
                scopes=scope_list,
                queues=queue_list,
            )
            if row is not None:
                log.info("created API key %r (%s…)", name, KEY_PREFIX + lookup_id)
                return key, row
            if await self._repo.get_key_by_name(name) is not None:
                raise KeyExists(f"an API key named {name!r} already exists", name=name)
            # 64 random bits collided with another key's lookup id: draw again.
        raise KeyExists("could not draw an unused lookup id; retry")

    async def list(self) -> Sequence[Row]:
        return await self._repo.list_keys()

    async def revoke(self, name: str) -> Row:
        """Revoke the key named `name` (again: no change); every replica is told."""
        row = await self._repo.revoke_key(name)
        if row is None:
            raise KeyNotFound(f"no API key is named {name!r}", name=name)
        log.info("revoked API key %r (%s…)", name, KEY_PREFIX + row["lookup_id"])
        return row


@dataclass(slots=True)
class _Cached:
    row: Row
    caller: Caller
    at: float


class Authenticator:
    """Who is calling, from the key a request sent; cached, and dropped on revocation."""

    def __init__(
        self,
        repo: JobsRepository,
        *,
        disabled: bool,
        loopback: bool,
        cache_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keys = Keys(repo)
        self._repo = repo
        self._disabled = disabled
        self._loopback = loopback
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._cache: dict[str, _Cached] = {}
        self._touched: dict[int, float] = {}
        self._keys_exist = False  # once true, for good
        self._no_keys_at: float | None = None  # when the database last said "no key"
        self._generation = 0  # bumped by every invalidation
        self._reading: dict[tuple[str, int], asyncio.Future[Any]] = {}
        self.listening = False  # the LISTEN connection is up: notifications arrive

    @property
    def open(self) -> bool:
        """Does this replica currently let every caller do everything?"""
        return self._disabled or (self._loopback and not self._keys_exist)

    async def start(self, host: str) -> None:
        """Decide how to serve, or raise `AuthRequired` rather than serve the network openly."""
        if self._disabled:
            log.warning(
                "AUTHENTICATION IS DISABLED (JOBQ_AUTH=disabled): anyone who can reach %s "
                "can enqueue, read payloads and finish jobs",
                host,
            )
            return
        try:
            self._keys_exist = self._keys_exist or await self._repo.any_key()
        except DatabaseUnavailable:
            log.warning("could not check for API keys (database unavailable); will on first use")
            return
        if self._keys_exist:
            log.info("API keys are required")
        elif self._loopback:
            self._no_keys_at = self._clock()
            log.warning(
                "\n%s\nNO API KEY EXISTS: jobq runs WITHOUT AUTHENTICATION on %s (loopback only).\n"
                "Anyone on this machine can enqueue, read payloads and finish jobs. Create a key\n"
                "with `jobq keys create --name admin --scopes admin` to require keys.\n%s",
                "!" * 78,
                host,
                "!" * 78,
            )
        else:
            raise AuthRequired(open_network_refusal(host))

    async def _read(self, what: str, read: Callable[[], Awaitable[T]]) -> T:
        """One database read of `what` at a time, shared by the requests that need it then.

        Only reads started since the latest invalidation are shared: a request never gets
        a row read before a revocation it could have seen.
        """
        key = (what, self._generation)
        future = self._reading.get(key)
        if future is None:
            future = asyncio.ensure_future(read())
            self._reading[key] = future

            def done(finished: asyncio.Future[Any]) -> None:
                self._reading.pop(key, None)
                if not finished.cancelled():
                    finished.exception()  # retrieved, even if every reader went away

            future.add_done_callback(done)
        return cast(T, await asyncio.shield(future))

    def _fresh(self, at: float) -> bool:
        return self.listening and self._clock() - at < self._cache_seconds

    async def _serving_open(self) -> bool:
        if self._disabled:
            return True
        if not self._loopback or self._keys_exist:
            return False
        if self._no_keys_at is not None and self._fresh(self._no_keys_at):
            return True
        generation = self._generation
        if await self._read("any key", self._repo.any_key):
            self._keys_exist = True  # for good: a notification may have said so meanwhile
        elif generation == self._generation:
            self._no_keys_at = self._clock()
        return not self._keys_exist

    async def authenticate(self, key: str | None) -> Caller:
        """The caller presenting `key` (None: no key sent); `Unauthorized` if it is refused."""
        if await self._serving_open():
            return OPEN
        if key is None:
            raise Unauthorized("this request needs an API key: send 'Authorization: Bearer <key>'")
        match = _KEY_FORMAT.match(key)
        if match is None:
            raise Unauthorized("this is not a jobq API key", invalid_token=True)
        lookup_id = match.group(1)
        cached = self._cache.get(lookup_id)
        if cached is None or not self._fresh(cached.at):
            generation = self._generation
            row = await self._read(lookup_id, lambda: self._repo.get_key(lookup_id))
            if row is None:
                self._cache.pop(lookup_id, None)
                raise Unauthorized("unknown API key", invalid_token=True)
            cached = _Cached(row, caller_from(row), self._clock())
            # Not if a revocation was announced while the row was on its way: it may be older.
            if generation == self._generation and self.listening and self._cache_seconds > 0:
                self._cache[lookup_id] = cached
        if not hmac.compare_digest(bytes(cached.row["secret_hash"]), digest(key)):
            raise Unauthorized("unknown API key", invalid_token=True)
        if cached.row["revoked_at"] is not None:
            raise Unauthorized("this API key was revoked", invalid_token=True)
        await self._touch(cached.caller)
        return cached.caller

    async def _touch(self, caller: Caller) -> None:
        """Keep `last_used_at` to within a minute, at one write a minute per key and process."""
        assert caller.key_id is not None
        now = self._clock()
        if now - self._touched.get(caller.key_id, -TOUCH_INTERVAL_SECONDS) < TOUCH_INTERVAL_SECONDS:
            return
        self._touched[caller.key_id] = now
        with contextlib.suppress(DatabaseUnavailable):  # the request's own statement will say
            await self._repo.touch_key(caller.key_id)

    # ---- invalidation -----------------------------------------------------------------

    def notified(self, payload: str) -> None:
        """A `jobq_keys` announcement: `created <lookup id>` or `revoked <lookup id>`."""
        event, _, lookup_id = payload.partition(" ")
        self._generation += 1
        if event == "created":
            self._keys_exist = True
        else:
            self._cache.pop(lookup_id, None)

    def forget(self) -> None:
        """Trust nothing cached (the LISTEN connection came back: announcements were missed)."""
        self._generation += 1
        self._cache.clear()
        self._no_keys_at = None

    # ---- key management, effective on this replica at once ------------------------------

    async def create(
        self, name: str, scopes: Sequence[str], queues: Sequence[str] | None
    ) -> tuple[str, Row]:
        key, row = await self.keys.create(name, scopes, queues)
        self.notified(f"created {row['lookup_id']}")
        return key, row

    async def revoke(self, name: str) -> Row:
        row = await self.keys.revoke(name)
        self.notified(f"revoked {row['lookup_id']}")
        return row
