"""Who is calling, for every request, from the API key it sent.

In `auto` mode a service listening on loopback only runs open (every caller may do
everything) until the first key is created; once one exists — revoked keys count —
keys are required for good. Verified keys are cached for `cache_seconds`; creating and
revoking a key NOTIFYs every replica, which drops its cache at once, and while a
replica's LISTEN connection is down it trusts no cache and asks the database on every
request. So a revoked key stops working on the replica that revoked it before the
answer is sent, and elsewhere as soon as the notification arrives. Knows nothing of HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from app.core.errors import DatabaseUnavailable, Unauthorized
from app.keys.caller import OPEN, Caller, caller_from
from app.keys.repository import KeysRepository
from app.keys.rows import KeyRow
from app.keys.service import Keys, digest

TOUCH_INTERVAL_SECONDS = 60.0
_KEY_FORMAT = re.compile(r"^jobq_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")

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


@dataclass(slots=True)
class _Cached:
    row: KeyRow
    caller: Caller
    at: float


class Authenticator:
    """Who is calling, from the key a request sent; cached, and dropped on revocation."""

    def __init__(
        self,
        repo: KeysRepository,
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
            self._keys_exist = self._keys_exist or await self._repo.any()
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
        if await self._read("any key", self._repo.any):
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
            row = await self._read(lookup_id, lambda: self._repo.get(lookup_id))
            if row is None:
                self._cache.pop(lookup_id, None)
                raise Unauthorized("unknown API key", invalid_token=True)
            cached = _Cached(row, caller_from(row), self._clock())
            # Not if a revocation was announced while the row was on its way: it may be older.
            if generation == self._generation and self.listening and self._cache_seconds > 0:
                self._cache[lookup_id] = cached
        named = cached.row.name
        if not hmac.compare_digest(bytes(cached.row.secret_hash), digest(key)):
            raise Unauthorized("unknown API key", invalid_token=True, key_name=named)
        if cached.row.revoked_at is not None:
            raise Unauthorized("this API key was revoked", invalid_token=True, key_name=named)
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
            await self._repo.touch(caller.key_id)

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
    ) -> tuple[str, KeyRow]:
        key, row = await self.keys.create(name, scopes, queues)
        self.notified(f"created {row.lookup_id}")
        return key, row

    async def revoke(self, name: str) -> KeyRow:
        row = await self.keys.revoke(name)
        self.notified(f"revoked {row.lookup_id}")
        return row
