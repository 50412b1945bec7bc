"""Workers' presence and the rules on it.

`Presence` is each replica's memory of the workers that called it since its last flush:
the lease, heartbeat and finishing routes tell it who called (a dict write, no
statement), and `run_once()` (every `JOBQ_WORKER_FLUSH_SECONDS`, a background task)
writes them all in one upsert, which also reads back the quiet workers: so each replica
knows within a flush whom another replica quieted, and the one that took the call
knows at once. `Workers` lists them and quiets them; `WorkersPruner` forgets those gone
past retention.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

from app.core.errors import DatabaseUnavailable, WorkerNotFound
from app.workers.params import ListWorkersParams, QuietWorkerParams
from app.workers.repository import WorkersRepository
from app.workers.rows import QuietRow, WorkerRow
from app.workers.schemas import MAX_LABEL_LENGTH

log = logging.getLogger("jobq.workers")

DEFAULT_PRUNE_BATCH = 1000


@dataclass(slots=True)
class Seen:
    """What one worker told this replica since the last flush (the latest wins, the
    counters add up); None: not told."""

    sdk: str | None = None  # `name/version`, as the `Jobq-Worker-Sdk` header sends it
    host: str | None = None
    queues: list[str] | None = None
    types: list[str] | None = None
    leased: int = 0
    finished: int = 0

    def row(self, worker_id: str) -> dict[str, Any]:
        """The worker as `flush_presence` takes it."""
        name, version = _sdk(self.sdk)
        return {
            "worker_id": worker_id,
            "sdk": name,
            "version": version,
            "host": None if self.host is None else self.host[:MAX_LABEL_LENGTH],
            "queues": self.queues,
            "types": self.types,
            "leased": self.leased,
            "finished": self.finished,
        }

    def merge(self, later: Seen) -> None:
        """Add what `later` told (a flush that failed gives its workers back)."""
        self.sdk = later.sdk or self.sdk
        self.host = later.host or self.host
        self.queues = later.queues if later.queues is not None else self.queues
        self.types = later.types if later.types is not None else self.types
        self.leased += later.leased
        self.finished += later.finished


def _sdk(sent: str | None) -> tuple[str | None, str | None]:
    """(name, version) of `name/version`; the whole as the name without a slash."""
    if not sent:
        return None, None
    name, slash, version = sent.rpartition("/")
    if not slash:
        return sent[:MAX_LABEL_LENGTH], None
    return name[:MAX_LABEL_LENGTH] or None, version[:MAX_LABEL_LENGTH] or None


class Presence:
    """The workers this replica saw since its last flush, and the quiet ones."""

    def __init__(self, repo: WorkersRepository, *, interval_seconds: float) -> None:
        self._repo = repo
        self.interval_seconds = interval_seconds
        self._seen: dict[str, Seen] = {}
        self._quiet: set[str] = set()
        self._told: dict[str, bool] = {}  # quiet or resumed here while a flush ran

    def saw(
        self,
        worker_id: str,
        *,
        sdk: str | None = None,
        host: str | None = None,
        queues: list[str] | None = None,
        types: list[str] | None = None,
        leased: int = 0,
        finished: int = 0,
    ) -> bool:
        """Note a call of `worker_id`; whether it is quiet (it must lease nothing)."""
        seen = self._seen.get(worker_id)
        if seen is None:
            seen = self._seen[worker_id] = Seen()
        if sdk is not None:
            seen.sdk = sdk
        if host is not None:
            seen.host = host
        if queues is not None:
            seen.queues = queues
        if types is not None:
            seen.types = types
        seen.leased += leased
        seen.finished += finished
        return worker_id in self._quiet

    def is_quiet(self, worker_id: str) -> bool:
        return worker_id in self._quiet

    def told(self, worker_id: str, quiet: bool) -> None:
        """A quiet or resume this replica took: known at once, whatever a flush running
        now reads back."""
        self._told[worker_id] = quiet
        if quiet:
            self._quiet.add(worker_id)
        else:
            self._quiet.discard(worker_id)

    async def run(self) -> None:
        """Flush every `interval_seconds` until cancelled; what a failed flush held waits
        for the next."""
        while True:
            await asyncio.sleep(self.interval_seconds)
            try:
                await self.run_once()
            except DatabaseUnavailable:
                log.warning("workers' presence: database unavailable, will retry")
            except Exception:
                log.exception("workers' presence: flush failed")

    async def last_flush(self) -> None:
        """At shutdown: write what this replica saw since its last flush."""
        try:
            await self.run_once()
        except DatabaseUnavailable:
            log.warning("workers' presence: database unavailable, the last calls seen are lost")

    async def run_once(self) -> int:
        """Write the workers seen since the last flush in one statement, and learn the
        quiet ones; how many were written."""
        seen, self._seen = self._seen, {}
        self._told = {}
        rows = [seen[worker_id].row(worker_id) for worker_id in sorted(seen)]
        try:
            quiet = set(await self._repo.flush(json.dumps(rows)))
        except BaseException:
            for worker_id, told in seen.items():  # the next flush writes them
                self._seen.setdefault(worker_id, Seen()).merge(told)
            raise
        for worker_id, told_quiet in self._told.items():
            if told_quiet:
                quiet.add(worker_id)
            else:
                quiet.discard(worker_id)
        self._quiet = quiet
        return len(rows)


@dataclass(frozen=True, slots=True)
class Visible:
    """The queues a key may read: names and LIKE patterns; None, None: every queue."""

    names: list[str] | None
    patterns: list[str] | None


class Workers:
    """The workers' listing, and quiet and resume."""

    def __init__(
        self,
        repo: WorkersRepository,
        presence: Presence,
        *,
        gone_seconds: float,
        retain_seconds: float,
    ) -> None:
        self._repo = repo
        self._presence = presence
        self.gone_seconds = gone_seconds
        self.retain_seconds = retain_seconds

    async def page(self, visible: Visible, after: str | None, limit: int) -> list[WorkerRow]:
        params = ListWorkersParams(
            visible.names, visible.patterns, self.retain_seconds, self.gone_seconds, after, limit
        )
        return await self._repo.page(params)

    async def quiet(self, worker_id: str, quiet: bool, key_name: str | None) -> QuietRow:
        """Quiet the worker (or let it lease again): one seen lately or holding jobs
        (admin keys see every queue); `WorkerNotFound` for any other."""
        row = await self._repo.quiet(QuietWorkerParams(worker_id, quiet, key_name))
        if row is None:
            raise WorkerNotFound
        self._presence.told(worker_id, quiet)
        log.info(
            "worker %s %s by %s",
            worker_id,
            "quieted" if quiet else "resumed",
            key_name or "an unauthenticated caller",
        )
        return row


class WorkersPruner:
    """Deletes workers not seen for `retain_seconds`, every `interval_seconds`; any
    replica may (the rows it deletes are locked, skipped by the others)."""

    def __init__(
        self,
        repo: WorkersRepository,
        *,
        retain_seconds: float,
        interval_seconds: float,
        batch_size: int = DEFAULT_PRUNE_BATCH,
    ) -> None:
        self._repo = repo
        self.retain_seconds = retain_seconds
        self.interval_seconds = interval_seconds
        self.batch_size = batch_size

    async def run_once(self) -> int:
        """Workers deleted."""
        total = 0
        while True:
            pruned = await self._repo.prune(self.retain_seconds, self.batch_size)
            total += pruned
            if pruned < self.batch_size:
                break
        if total:
            log.info("pruned %d workers", total)
        return total
