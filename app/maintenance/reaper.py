"""The reaper: jobs whose lease expired go back to the queue, or to `failed`.

A job whose cancellation was requested is not retried: it becomes `cancelled`. A lease
that ended at its attempt's timeout fails the attempt as `timeout`. Each pass also
cancels the jobs not leased by their start deadline (`start_by`), as `expired`.

A batch that fails (one job's move raises: its dependents' cascade, a broken row) does
not stop the pass: its jobs are moved one at a time, each failure logged with the job
(`reaper.job_failed`) and left out of the rest of the pass, so every other expired lease,
of every queue, is still reclaimed.

Shaped like River's maintenance services: `run_once()` does one full pass in batches
and returns what it did (tests call it directly); `loop.run_periodically` adds
the interval. Leadership is a transaction-level advisory lock taken with each batch,
so only one replica reaps at a time and a dead leader holds nothing.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import Counter
from dataclasses import dataclass, field

import asyncpg

from app.core import metrics
from app.core.logging import event
from app.core.retry import Backoff
from app.maintenance import telemetry
from app.maintenance.repository import MaintenanceRepository
from app.maintenance.rows import LeaderBatch, Reaped

log = logging.getLogger("jobq.reaper")  # one line per batch reaped (the chaos test reads them)
passes = logging.getLogger("jobq.maintenance")  # each pass; leadership changes
STALE_AFTER_INTERVALS = 3  # readiness fails when no pass finished for this many intervals
# The lock is taken per batch, so replicas take turns: one pass that found it held is
# another replica's turn, not a lost leadership. This many in a row are.
LOST_AFTER_REFUSED_PASSES = 3


def replica_name() -> str:
    """How this process names itself in the reaper's log: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(slots=True)
class ReapResult:
    """One pass: whether this replica was the leader, and how many jobs went where."""

    leader: bool = True
    requeued: int = 0
    failed: int = 0
    job_ids: list[int] = field(default_factory=list)
    cancelled: int = 0  # cancellation requested: stopped rather than retried
    expired: list[int] = field(default_factory=list)  # not started by their deadline

    @property
    def reaped(self) -> int:
        return self.requeued + self.failed + self.cancelled


class Reaper:
    """Returns expired leases to the queue, every `interval_seconds`."""

    def __init__(
        self,
        repo: MaintenanceRepository,
        *,
        backoff: Backoff,
        interval_seconds: float,
        batch_size: int,
    ) -> None:
        self._repo = repo
        self._backoff = backoff
        self.interval_seconds = interval_seconds
        self.batch_size = batch_size
        self.replica = replica_name()
        self._last_pass = time.monotonic()  # a fresh reaper counts as on time
        self.leader: bool | None = None  # whether this replica leads (last logged)
        self._refused = 0  # passes in a row that found the lock held by another replica

    @property
    def on_time(self) -> bool:
        """A pass finished (as leader or not) within the last few intervals."""
        late = time.monotonic() - self._last_pass
        return late < STALE_AFTER_INTERVALS * self.interval_seconds

    async def run_once(self) -> ReapResult:
        """Reap every expired lease, a batch at a time."""
        result = ReapResult()
        started = time.monotonic()
        failed: list[int] = []  # jobs this pass could not move: left out from then on
        while True:
            try:
                batch = await self._repo.reap_batch(self.batch_size, self._backoff, failed)
            except asyncpg.PostgresError:
                more = await self._reap_one_at_a_time(result, failed)
                if more is None:
                    result.leader = False
                    break
                if more:
                    continue
                break
            if batch is None:
                result.leader = False
                break
            self._record(batch, result)
            if len(batch.rows) < self.batch_size:
                break
        if result.leader:
            await self._expire(result)
        self._last_pass = time.monotonic()
        metrics.REAPER_LAST_RUN.set(time.time())
        self._report(result, self._last_pass - started)
        return result

    async def _expire(self, result: ReapResult) -> None:
        """Cancel the jobs past their start deadline, a batch at a time."""
        while True:
            batch = await self._repo.expire_batch(self.batch_size)
            if batch is None:
                return
            telemetry.expired(batch.rows)
            result.expired.extend(row.id for row in batch.rows)
            if len(batch.rows) < self.batch_size:
                return

    async def _reap_one_at_a_time(self, result: ReapResult, failed: list[int]) -> bool | None:
        """Move the next batch's jobs one by one, adding those that fail to `failed`;
        whether more may be left (None: another replica is maintaining)."""
        job_ids = await self._repo.expired_leases(self.batch_size, failed)
        for job_id in job_ids:
            try:
                batch = await self._repo.reap_batch(1, self._backoff, failed, only=job_id)
            except asyncpg.PostgresError as error:
                failed.append(job_id)
                event(
                    passes,
                    "reaper.job_failed",
                    "could not reap job_id=%d replica=%s: %s",
                    job_id,
                    self.replica,
                    error,
                    level=logging.ERROR,
                    job_id=job_id,
                    replica=self.replica,
                    error=str(error),
                )
                continue
            if batch is None:
                return None
            self._record(batch, result)
        return len(job_ids) == self.batch_size

    def _record(self, batch: LeaderBatch[Reaped], result: ReapResult) -> None:
        """Count one batch into `result`, and log what it moved."""
        rows = batch.rows
        telemetry.reaped(rows)
        states = Counter(row.state for row in rows)
        result.requeued += states["queued"]
        result.failed += states["failed"]
        result.cancelled += states["cancelled"]
        result.job_ids.extend(row.id for row in rows)
        if rows:
            # One line per batch: which replica held the lock, when (by the database's
            # clock, inside the lock: intervals of two replicas never overlap), and
            # what it moved.
            job_ids = ",".join(str(row.id) for row in rows if row.state != "cancelled")
            event(
                log,
                "reaper.batch",
                "reaped replica=%s batch_started=%.6f batch_ended=%.6f requeued=%d failed=%d"
                " job_ids=%s",
                self.replica,
                batch.started,
                batch.ended,
                states["queued"],
                states["failed"],
                job_ids,
                replica=self.replica,
                batch_started=batch.started,
                batch_ended=batch.ended,
                requeued=states["queued"],
                failed=states["failed"],
                job_ids=job_ids,
            )
        if states["cancelled"]:
            cancelled_ids = ",".join(str(row.id) for row in rows if row.state == "cancelled")
            event(
                log,
                "reaper.cancelled",
                "reaped cancelled jobs replica=%s cancelled=%d job_ids=%s",
                self.replica,
                states["cancelled"],
                cancelled_ids,
                replica=self.replica,
                cancelled=states["cancelled"],
                job_ids=cancelled_ids,
            )

    def _report(self, result: ReapResult, seconds: float) -> None:
        """One event per pass (INFO when it reaped, else DEBUG), and one when leadership
        is gained or lost (`LOST_AFTER_REFUSED_PASSES` refused passes in a row)."""
        self._refused = 0 if result.leader else self._refused + 1
        leads = self._refused == 0 or (
            self.leader is True and self._refused < LOST_AFTER_REFUSED_PASSES
        )
        if leads != self.leader:
            event(
                passes,
                "leadership.changed",
                "replica=%s %s",
                self.replica,
                "leads maintenance (the lock is taken per batch: other replicas may take turns)"
                if leads
                else f"does not lead maintenance: another replica held the lock on its last "
                f"{self._refused} pass(es)",
                replica=self.replica,
                leader=leads,
            )
            self.leader = leads
        event(
            passes,
            "reaper.run",
            "reaper pass replica=%s leader=%s requeued=%d failed=%d cancelled=%d duration_ms=%.1f",
            self.replica,
            result.leader,
            result.requeued,
            result.failed,
            result.cancelled,
            seconds * 1000,
            level=logging.INFO if result.reaped else logging.DEBUG,
            replica=self.replica,
            leader=result.leader,
            requeued=result.requeued,
            failed=result.failed,
            cancelled=result.cancelled,
            duration_ms=round(seconds * 1000, 3),
        )
