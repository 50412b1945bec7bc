"""One `LISTEN` connection per process, announcing jobs that became due.

Every statement that makes jobs `queued` sends `NOTIFY jobq_due, '<queue> <epoch>'`
(the earliest `run_at` per queue) when it commits. The listener passes each to a
callback, while it is asked to (`hear_due`): a process whose leases find jobs at once
has nobody to wake, and reading an announcement per enqueued job would cost each such
process CPU for every job enqueued anywhere. If its connection drops (noticed at once
when the server closes it, else by a keepalive query) it says so, reconnects with
backoff, and the waiters fall back to polling meanwhile. It holds no pooled connection.

The same connection listens on `jobq_keys`, where creating or revoking an API key
announces `created <lookup id>` or `revoked <lookup id>`, so every replica drops a
revoked key from its cache at once; on `jobq_finished`, where a job someone waits for
announces its id when it finishes; and on `jobq_settings`, where a queue whose settings
changed announces its name; and on `jobq_events`, where the stamper announces the last
position it gave committed events.

Any database role may `NOTIFY` on these channels, so an announcement is untrusted
input: `parse_due` and `parse_finished` accept exactly the shapes the triggers send
(a name by the name rule, a finite epoch within `timestamptz`'s range, a bounded count,
a job id) and everything else is dropped, counted in `jobq_announcements_dropped`, and
logged at most once per `DROPPED_LOG_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
import time
from collections.abc import Callable

import asyncpg

from app.core.metrics import ANNOUNCEMENTS_DROPPED
from app.core.names import MAX_BIGINT, is_name
from app.db.url import async_url

CHANNEL = "jobq_due"
KEYS_CHANNEL = "jobq_keys"
FINISHED_CHANNEL = "jobq_finished"
SETTINGS_CHANNEL = "jobq_settings"
EVENTS_CHANNEL = "jobq_events"
APPLICATION_NAME = "jobq-listener"
KEEPALIVE_SECONDS = 5.0
RECONNECT_MIN_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 10.0
DROPPED_LOG_SECONDS = 60.0  # a flood of malformed announcements logs one line this often
# `extract(epoch FROM due)` of a finite timestamptz: digits, a point, digits (and a sign)
_EPOCH = re.compile(r"-?[0-9]{1,12}(\.[0-9]{1,9})?")
_COUNT = re.compile(r"[0-9]{1,19}")
MAX_EPOCH = 253402300800.0  # 10000-01-01: past any due time a job can have
MAX_ANNOUNCED_JOBS = 1_000_000  # past any one statement's count: a waiter per job at most
log = logging.getLogger("jobq.listener")


def parse_due(payload: str) -> tuple[str, float, int | None] | None:
    """`<queue> <due epoch> [<jobs>]` as `jobq.announce_due` sends it, or None."""
    fields = payload.split(" ")
    if len(fields) not in (2, 3) or not is_name(fields[0]) or "\n" in fields[0]:
        return None
    if _EPOCH.fullmatch(fields[1]) is None:
        return None
    due = float(fields[1])
    if not (math.isfinite(due) and abs(due) < MAX_EPOCH):
        return None
    if len(fields) == 2:
        return fields[0], due, None
    if _COUNT.fullmatch(fields[2]) is None or int(fields[2]) > MAX_ANNOUNCED_JOBS:
        return None
    return fields[0], due, int(fields[2])


def parse_finished(payload: str) -> int | None:
    """`<job id>` as the jobs table's trigger sends it, or None."""
    if _COUNT.fullmatch(payload) is None or not 0 < int(payload) <= MAX_BIGINT:
        return None
    return int(payload)


class _Dropped:
    """Counts malformed announcements; logs one line per interval, not one per drop."""

    def __init__(self) -> None:
        self._unlogged = 0
        self._logged_at = -math.inf

    def __call__(self, channel: str, payload: object) -> None:
        ANNOUNCEMENTS_DROPPED.labels(channel).inc()
        self._unlogged += 1
        now = time.monotonic()
        if now - self._logged_at >= DROPPED_LOG_SECONDS:
            log.warning(
                "ignored %d malformed announcement(s), the last on %s: %.80r",
                self._unlogged,
                channel,
                payload,
            )
            self._unlogged = 0
            self._logged_at = now


def _dsn(url: str) -> str:
    return async_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class DueListener:
    """Keeps a LISTEN connection up and reports announcements and its own state."""

    def __init__(
        self,
        url: str,
        *,
        on_due: Callable[[str, float, int | None], None],
        on_state: Callable[[bool], None],
        on_hearing: Callable[[bool], None],
        on_keys: Callable[[str], None] | None = None,
        on_finished: Callable[[int], None] | None = None,
        on_settings: Callable[[str], None] | None = None,
        on_events: Callable[[], None] | None = None,
    ) -> None:
        self._dsn = _dsn(url)
        self._on_due = on_due
        self._on_state = on_state
        self._on_keys = on_keys
        self._on_finished = on_finished
        self._on_settings = on_settings
        self._on_events = on_events
        self._on_hearing = on_hearing
        self._hear = False  # asked to listen for due jobs
        self._heard = False  # `LISTEN jobq_due` is in effect on the connection
        self._poke = asyncio.Event()  # the wish changed, or the connection closed
        self._dropped = _Dropped()

    def hear_due(self, wanted: bool) -> None:
        """Listen for due jobs (True) or stop (False); `on_hearing` says when it holds."""
        if wanted != self._hear:
            self._hear = wanted
            self._poke.set()

    def _notified(self, _conn: object, _pid: int, channel: str, payload: object) -> None:
        # `<queue> <due epoch> [<jobs>]`: without a count (a resumed queue), all waiters wake
        due = parse_due(str(payload))
        if due is None:
            self._dropped(channel, payload)
        else:
            self._on_due(*due)

    def _keys_notified(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        if self._on_keys is not None:
            self._on_keys(str(payload))

    def _finished(self, _conn: object, _pid: int, channel: str, payload: object) -> None:
        if self._on_finished is not None:
            job_id = parse_finished(str(payload))
            if job_id is None:
                self._dropped(channel, payload)
            else:
                self._on_finished(job_id)

    def _settings_changed(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        if self._on_settings is not None:
            self._on_settings(str(payload))

    def _events_stamped(self, _conn: object, _pid: int, _channel: str, _payload: object) -> None:
        if self._on_events is not None:
            self._on_events()  # the payload is not read: the stream reads the table

    async def run(self) -> None:
        """Listen until cancelled, reconnecting whenever the connection is lost."""
        backoff = RECONNECT_MIN_SECONDS
        while True:
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(
                    self._dsn,
                    timeout=KEEPALIVE_SECONDS,
                    server_settings={"application_name": APPLICATION_NAME},
                )
                if self._on_keys is not None:
                    await conn.add_listener(KEYS_CHANNEL, self._keys_notified)
                if self._on_finished is not None:
                    await conn.add_listener(FINISHED_CHANNEL, self._finished)
                if self._on_settings is not None:
                    await conn.add_listener(SETTINGS_CHANNEL, self._settings_changed)
                if self._on_events is not None:
                    await conn.add_listener(EVENTS_CHANNEL, self._events_stamped)
                # a connection the server closes (a restart, pg_terminate_backend) is
                # known at once, not at the next keepalive
                conn.add_termination_listener(lambda _conn: self._poke.set())
                log.info("listening for announcements")
                self._on_state(True)
                backoff = RECONNECT_MIN_SECONDS
                await self._serve(conn)
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                self._heard_now(False)
                self._on_state(False)
                log.warning("listener lost (%s); polling until it reconnects", exc)
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(conn.close(), KEEPALIVE_SECONDS)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RECONNECT_MAX_SECONDS)

    async def _serve(self, conn: asyncpg.Connection) -> None:
        """Follow the wish to hear due jobs, and check the connection, until it is lost."""
        while True:
            self._poke.clear()
            if conn.is_closed():
                raise ConnectionResetError("the server closed the connection")
            if self._hear != self._heard:
                wanted = self._hear
                if wanted:  # the LISTEN is in effect when this returns
                    await asyncio.wait_for(
                        conn.add_listener(CHANNEL, self._notified), KEEPALIVE_SECONDS
                    )
                else:
                    await asyncio.wait_for(
                        conn.remove_listener(CHANNEL, self._notified), KEEPALIVE_SECONDS
                    )
                self._heard_now(wanted)
                continue
            try:
                await asyncio.wait_for(self._poke.wait(), KEEPALIVE_SECONDS)
            except TimeoutError:  # a dead peer does not always close the socket: ask
                await asyncio.wait_for(conn.execute("SELECT 1"), KEEPALIVE_SECONDS)

    def _heard_now(self, heard: bool) -> None:
        if heard != self._heard:
            self._heard = heard
            self._on_hearing(heard)
