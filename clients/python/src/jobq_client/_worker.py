"""`Worker`: lease jobs, run their handlers, heartbeat, report, acknowledge in batches.

    worker = Worker(queues=["images"], concurrency=8)

    @worker.handler("resize")
    async def resize(job: Job) -> dict[str, int]:
        await job.progress(50, stage="resize")
        return {"width": job.payload["width"] // 2}

    worker.run()   # until SIGTERM or Ctrl-C

A handler's return value completes the job; an exception fails the attempt with the
exception's type and message (retried after the service's backoff, unless it is a
`Permanent` error or the attempts are used up). Async handlers run on the event loop,
plain functions in threads of their own. While a handler runs, its lease is extended
by a heartbeat every third of the lease, and `job.cancel_requested` follows what the
heartbeats answer.

Outcomes are acknowledged in batches (every `ack_interval_seconds`, or `ack_batch_size`
at once). When a finished job frees a slot of a worker that was full, its ack goes at
once with the lease of the next jobs, in one call (complete-and-lease): on a queue with
`max_running`, the slot the job held is taken again without waiting for anyone.

A job with a `timeout_seconds` gets that long from its lease: then the service fails
the attempt as `timeout` (and refuses this worker's calls for it), and the worker
cancels the handler, cooperatively first (`job.timed_out` becomes true,
`job.raise_if_cancelled()` raises, an async handler gets `CancelledError`), then by
abandoning it after `timeout_grace_seconds` (a thread runs on, ignored); its slot is
free again and the event is logged (`job.timed_out`).

Every call the worker makes names it (`Jobq-Worker`, `Jobq-Worker-Sdk`,
`Jobq-Worker-Host` headers), so the service lists it (`GET /v1/workers`, `jobq workers
list`) with its SDK, host, queues and types; when it made no call for
`presence_seconds` (idle between polls, or full of long jobs), it says it is alive
(`POST /v1/workers/{id}/presence`).

An admin may quiet it (`jobq workers quiet ID`), as Sidekiq's quiet: at its next call
it stops leasing, finishes the jobs it holds (heartbeating them as ever), then idles,
still pinging every `presence_seconds`, until resumed (`jobq workers resume ID`) or
stopped. It does not exit by itself: a supervisor would only start it again.

On SIGTERM or SIGINT (or `stop()`) the worker stops leasing, gives running handlers
`grace_seconds` to finish, then releases the jobs still running: each is failed as a
retryable `WorkerShutdown` with no delay, so another worker can take it at once (this
counts as one of the job's attempts, as a lapsed lease would). A second signal skips
the rest of the grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import inspect
import json
import logging
import os
import signal
import socket
import sysconfig
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

from jobq_client import _calls, _tracing
from jobq_client._calls import Call
from jobq_client._client import AsyncClient, Client
from jobq_client._errors import (
    BadRequest,
    Forbidden,
    JobqError,
    LeaseLost,
    LeaseNotFound,
    NotFound,
    PayloadTooLarge,
    SnoozeLimitReached,
    Unauthorized,
    ValidationError,
    error_class,
)
from jobq_client._job import Job, Snooze
from jobq_client._models import Ack, AckResult, Complete, Fail, Lease

log = logging.getLogger("jobq_client.worker")

DEFAULT_CONCURRENCY = 10
DEFAULT_WAIT_SECONDS = 20.0
DEFAULT_GRACE_SECONDS = 30.0
DEFAULT_ACK_INTERVAL_SECONDS = 0.05
DEFAULT_ACK_BATCH_SIZE = 100
MAX_LEASE_BATCH = 100
LEASE_ERROR_BACKOFF_SECONDS = 1.0
LEASE_ERROR_BACKOFF_CAP_SECONDS = 30.0
HEARTBEAT_RETRY_SECONDS = 1.0
RELEASE_WAIT_SECONDS = 5.0
DEFAULT_TIMEOUT_GRACE_SECONDS = 5.0  # a timed-out handler's time to stop before it is abandoned
# A worker that made no call for this long says it is alive; quiet, it asks this often
# whether it is resumed. A fourth of the service's default gone interval (60 s).
DEFAULT_PRESENCE_SECONDS = 15.0
SDK_NAME = "jobq-client-python"
SDK_VERSION = "0.1.0"  # jobq_client.__version__ (a test holds them equal)
MAX_TRACEBACK_CHARS = 4000
SHUTDOWN_ERROR_TYPE = "WorkerShutdown"

# Answers to a lease request that no retry can fix: the worker's configuration is wrong.
_FATAL = (BadRequest, Unauthorized, Forbidden, NotFound, ValidationError)


def _fields(job: Job, event: str, started: float, **more: Any) -> dict[str, Any]:
    """A log record's `extra`: its event and fields, as the service's JSON logs carry
    them (`jobq worker` prints them so)."""
    return {
        "event": event,
        "fields": {
            "job_id": job.id,
            "queue": job.queue,
            "type": job.type,
            "attempt": job.attempt,
            "duration_ms": round((time.monotonic() - started) * 1000, 3),
            **more,
        },
    }


HandlerFunc = Callable[[Job], Any]
F = TypeVar("F", bound=HandlerFunc)
T = TypeVar("T")


class Worker:
    """Runs handlers for the jobs of some queues; see the module's documentation.

    `client` is an `AsyncClient` or a `Client` (its settings are used); by default one
    is made from the environment, as `Client()` is. Jobs are leased `concurrency` at most
    at a time, waiting up to `wait_seconds` for work (long poll). `lease_seconds`
    overrides each job's own lease length. A handler still running
    `timeout_grace_seconds` after its job's timeout is abandoned. A worker that made no
    call for `presence_seconds` tells the service it is alive (and, quiet, asks whether
    it may lease again).
    """

    def __init__(
        self,
        client: AsyncClient | Client | None = None,
        *,
        queues: Sequence[str],
        concurrency: int = DEFAULT_CONCURRENCY,
        worker_id: str | None = None,
        lease_seconds: int | None = None,
        wait_seconds: float = DEFAULT_WAIT_SECONDS,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
        ack_interval_seconds: float = DEFAULT_ACK_INTERVAL_SECONDS,
        ack_batch_size: int = DEFAULT_ACK_BATCH_SIZE,
        timeout_grace_seconds: float = DEFAULT_TIMEOUT_GRACE_SECONDS,
        presence_seconds: float = DEFAULT_PRESENCE_SECONDS,
    ) -> None:
        if not queues:
            raise ValueError("a worker needs at least one queue")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.client = client
        self.queues = list(queues)
        self.concurrency = concurrency
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.lease_seconds = lease_seconds
        self.wait_seconds = wait_seconds
        self.grace_seconds = grace_seconds
        self.ack_interval_seconds = ack_interval_seconds
        self.ack_batch_size = ack_batch_size
        self.timeout_grace_seconds = timeout_grace_seconds
        self.presence_seconds = presence_seconds
        self.handlers: dict[str, HandlerFunc] = {}
        self._session: _Session | None = None
        self._stop_requested = False
        self._lock = threading.Lock()

    def handler(self, job_type: str) -> Callable[[F], F]:
        """Register the decorated function (async or not) for jobs of `job_type`."""

        def register(func: F) -> F:
            if job_type in self.handlers:
                raise ValueError(f"a handler for {job_type!r} is already registered")
            self.handlers[job_type] = func
            return func

        return register

    def stop(self) -> None:
        """Stop leasing and drain, as on SIGTERM. Safe to call from any thread."""
        with self._lock:
            self._stop_requested = True
            session = self._session
        if session is not None:
            session.loop.call_soon_threadsafe(session.stop)

    def run(self) -> None:
        """Run until SIGTERM or SIGINT (or `stop()`), then drain and return."""
        asyncio.run(self.run_async(handle_signals=True))

    async def run_async(self, *, handle_signals: bool = False) -> None:
        """Run on the current event loop until `stop()` (or a signal, if handled)."""
        if not self.handlers:
            raise RuntimeError("register at least one handler with @worker.handler(type)")
        client, owned = self._async_client()
        loop = asyncio.get_running_loop()
        session = _Session(self, client, loop)
        with self._lock:
            if self._session is not None:
                raise RuntimeError("this worker is already running")
            self._session = session
            stop_first = self._stop_requested
        if stop_first:
            session.stop()
        handled = _install_signal_handlers(loop, session) if handle_signals else []
        try:
            await session.run()
        finally:
            for signum in handled:
                loop.remove_signal_handler(signum)
            with self._lock:
                self._session = None
                self._stop_requested = False
            if owned:
                await client.aclose()

    def _async_client(self) -> tuple[AsyncClient, bool]:
        if isinstance(self.client, AsyncClient):
            return self.client, False
        if isinstance(self.client, Client):
            source = self.client
            return (
                AsyncClient(
                    source.base_url,
                    api_key=source.api_key,
                    timeout=source.timeout,
                    retry=source.retry,
                ),
                True,
            )
        return AsyncClient(), True


def _install_signal_handlers(loop: asyncio.AbstractEventLoop, session: _Session) -> list[int]:
    if threading.current_thread() is not threading.main_thread():
        return []
    installed: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, session.on_signal, signum)
        installed.append(signum)
    return installed


async def _wait_any(*events: asyncio.Event, within: float | None = None) -> None:
    """Until one of the events is set, or `within` seconds have passed."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=within, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


def _failure(exc: BaseException) -> tuple[str, str, dict[str, Any], bool, float | None]:
    """(type, message, details, retryable, retry_after_seconds) for a handler's exception."""
    retryable = getattr(exc, "retryable", True) is not False
    retry_after = getattr(exc, "retry_after_seconds", None)
    if not isinstance(retry_after, int | float) or isinstance(retry_after, bool):
        retry_after = None
    frames = _from_the_handler(exc.__traceback__)
    text = "".join(traceback.format_exception(type(exc), exc, frames))[-MAX_TRACEBACK_CHARS:]
    return type(exc).__name__, str(exc), {"traceback": text}, retryable, retry_after


_SDK_DIR = os.path.dirname(os.path.abspath(__file__))
_STDLIB_DIR = sysconfig.get_paths()["stdlib"]


def _from_the_handler(frames: TracebackType | None) -> TracebackType | None:
    """A handler's traceback from its first frame on: the SDK's frames that called it,
    and the standard library's that ran it in a thread, are left out (the last frame
    stays, whoever's it is)."""
    while frames is not None and frames.tb_next is not None:
        filename = os.path.abspath(frames.tb_frame.f_code.co_filename)
        if not filename.startswith((_SDK_DIR + os.sep, _STDLIB_DIR + os.sep)):
            break
        frames = frames.tb_next
    return frames


class _TimedOut(Exception):
    """The handler ran past its job's timeout."""


class _Session:
    """One run of a worker: its running jobs, pending acks and stop state."""

    def __init__(self, worker: Worker, client: AsyncClient, loop: asyncio.AbstractEventLoop):
        self.worker = worker
        self.client = client
        self.loop = loop
        self.running: dict[str, tuple[Job, asyncio.Task[None]]] = {}
        self.stopping = asyncio.Event()
        self.forced = asyncio.Event()
        self.slot_free = asyncio.Event()
        self.pending_acks: list[Ack] = []
        self.ack_added = asyncio.Event()
        self.closing = False
        self.headers = {
            "Jobq-Worker": worker.worker_id,
            "Jobq-Worker-Sdk": f"{SDK_NAME}/{SDK_VERSION}",
            "Jobq-Worker-Host": socket.gethostname(),
        }
        self.quiet = False  # an admin asked it to lease no more
        self.resumed = asyncio.Event()
        self.last_call = loop.time()

    # ---- calling the service ---------------------------------------------------------

    async def send(self, call: Call[T]) -> T:
        """The call's answer, the call naming this worker."""
        self.last_call = self.loop.time()
        return await self.client._call(dataclasses.replace(call, headers=self.headers))

    async def send_leasing(self, call: Call[T]) -> T:
        """`send` for a call that leases: a quiet worker's answer says so (it holds no
        lease), and the worker stops leasing."""
        value, quiet = await self.send(_calls.telling_quiet(call))
        if quiet:
            self.set_quiet(True)
        return value

    def set_quiet(self, quiet: bool) -> None:
        if quiet == self.quiet:
            return
        self.quiet = quiet
        worker_id = self.worker.worker_id
        if quiet:
            self.resumed.clear()
            log.info("worker %s: quiet: leasing no more until resumed (%d jobs running)",
                     worker_id, len(self.running))  # fmt: skip
        else:
            log.info("worker %s: resumed: leasing again", worker_id)
            self.resumed.set()

    async def presence_loop(self) -> None:
        """Say the worker is alive when it made no call for `presence_seconds`; quiet,
        ask that often whether it is resumed."""
        worker = self.worker
        every = worker.presence_seconds
        while True:
            left = self.last_call + every - self.loop.time()
            if left > 0 and not self.quiet:
                await asyncio.sleep(left)
                continue
            call = _calls.presence(worker.worker_id, worker.queues, sorted(worker.handlers))
            try:
                self.set_quiet(await self.send(call))
            except JobqError as exc:
                log.warning("worker %s: presence ping failed (%s)", worker.worker_id, exc)
            await asyncio.sleep(every)

    # ---- control ---------------------------------------------------------------------

    def stop(self) -> None:
        if not self.stopping.is_set():
            log.info("worker %s: stopping, no more leases", self.worker.worker_id)
        self.stopping.set()

    def on_signal(self, signum: int) -> None:
        if self.stopping.is_set():
            log.info("second %s: releasing running jobs now", signal.Signals(signum).name)
            self.forced.set()
        self.stop()

    async def run(self) -> None:
        worker = self.worker
        log.info(
            "worker %s: serving %s on %s from %s (concurrency %d)",
            worker.worker_id,
            ", ".join(sorted(worker.handlers)),
            ", ".join(worker.queues),
            self.client.base_url,
            worker.concurrency,
        )
        acks = asyncio.create_task(self.ack_loop())
        presence = asyncio.create_task(self.presence_loop())
        fatal: JobqError | None = None
        try:
            try:
                await self.lease_loop()
            except _FATAL as exc:
                log.error("leasing refused (%s): stopping", exc)
                fatal = exc
            await self.drain()
        finally:
            presence.cancel()
            self.closing = True
            self.ack_added.set()
            await acks
            for _, task in list(self.running.values()):
                task.cancel()
        log.info("worker %s: stopped", worker.worker_id)
        if fatal is not None:
            raise fatal

    # ---- leasing ---------------------------------------------------------------------

    async def lease_loop(self) -> None:
        worker = self.worker
        errors = 0
        while not self.stopping.is_set():
            if self.quiet:  # until resumed: the running jobs finish meanwhile
                await _wait_any(self.resumed, self.stopping)
                continue
            free = worker.concurrency - len(self.running)
            if free <= 0:
                self.slot_free.clear()
                await _wait_any(self.slot_free, self.stopping)
                continue
            if self.pending_acks:  # complete-and-lease: the freed slots taken in one call
                leases = await self.ack_and_lease(min(free, MAX_LEASE_BATCH))
                for lease in leases:
                    self.start(lease)
                if leases:
                    continue
            request = asyncio.create_task(
                self.send_leasing(
                    _calls.lease(
                        worker.queues,
                        worker_id=worker.worker_id,
                        max_jobs=min(free, MAX_LEASE_BATCH),
                        types=sorted(worker.handlers),
                        lease_seconds=worker.lease_seconds,
                        wait_seconds=worker.wait_seconds,
                    )
                )
            )
            stopped = asyncio.create_task(self.stopping.wait())
            await asyncio.wait({request, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if not request.done():
                # Hanging up makes the service hand this request no job.
                request.cancel()
                with contextlib.suppress(asyncio.CancelledError, JobqError):
                    await request
                return
            try:
                leases = request.result()
            except _FATAL:
                raise
            except JobqError as exc:
                errors += 1
                wait = min(LEASE_ERROR_BACKOFF_CAP_SECONDS, LEASE_ERROR_BACKOFF_SECONDS * errors)
                log.warning("lease failed (%s); trying again in %.0fs", exc, wait)
                await _wait_any(self.stopping, within=wait)
                continue
            errors = 0
            for lease in leases:
                self.start(lease)

    def start(self, lease: Lease) -> None:
        job = Job(lease, self)
        job._next_beat = self.loop.time() + self.beat_interval(job)
        timeout = lease.job.timeout_seconds
        # Counted from now, on this machine's clock: the service's began a little
        # earlier, so it has failed the attempt by then.
        job._deadline = None if timeout is None else self.loop.time() + timeout
        task = asyncio.create_task(self.execute(job), name=f"jobq-job-{job.id}")
        self.running[job.lease_id] = (job, task)

    # ---- running a job ---------------------------------------------------------------

    async def execute(self, job: Job) -> None:
        beats = asyncio.create_task(self.heartbeat_loop(job))
        outcome: Ack | None = None
        try:
            outcome = await self.outcome(job)
        except asyncio.CancelledError:
            if job.released:
                return  # drain() queued the release
            raise
        finally:
            beats.cancel()
            self.running.pop(job.lease_id, None)
            self.slot_free.set()
        if outcome is not None and not job.lease_lost:
            self.add_ack(outcome)

    async def outcome(self, job: Job) -> Ack | None:
        """Run the handler: a completion, a failure, or None when the lease was lost.
        Each finished run is logged with its duration (`job.finished` / `job.failed`)."""
        handler = self.worker.handlers[job.type]
        started = time.monotonic()
        try:
            with _tracing.handling(job.record):
                result = await self.within_timeout(handler, job)
        except _TimedOut:
            job.lease_lost = True
            log.warning(
                "job %s (%s) ran past its timeout of %ss; the service failed the attempt",
                job.id, job.type, job.record.timeout_seconds,
                extra=_fields(job, "job.timed_out", started,
                              timeout_seconds=job.record.timeout_seconds),
            )  # fmt: skip
            return None
        except (LeaseLost, LeaseNotFound) as exc:
            job.lease_lost = True
            log.warning("job %s: lease lost (%s); dropping it", job.id, exc)
            return None
        except Snooze as exc:
            return await self.snooze(job, exc.seconds, started)
        except Exception as exc:
            error_type, message, details, retryable, retry_after = _failure(exc)
            log.warning(
                "job %s (%s) failed after %.3fs: %s: %s",
                job.id, job.type, time.monotonic() - started, error_type, message,
                extra=_fields(job, "job.failed", started, error_type=error_type,
                              retryable=retryable),
            )  # fmt: skip
            return Fail(job.lease_id, error_type, message, details, retryable, retry_after)
        try:
            json.dumps(result, allow_nan=False)  # what the service would refuse
        except (TypeError, ValueError) as exc:
            message = f"the handler's result cannot be stored as JSON: {exc}"
            log.warning("job %s (%s) failed: %s", job.id, job.type, message)
            return Fail(job.lease_id, "InvalidResult", message, retryable=False)
        log.info(
            "job %s (%s) succeeded in %.3fs",
            job.id, job.type, time.monotonic() - started,
            extra=_fields(job, "job.finished", started),
        )  # fmt: skip
        return Complete(job.lease_id, result)

    async def snooze(self, job: Job, seconds: float, started: float) -> Ack | None:
        """Put the job back for `seconds` (nothing left to acknowledge); past the
        service's cap on snoozes, fail the attempt instead."""
        try:
            await self.send(_calls.snooze(job.lease_id, seconds))
        except SnoozeLimitReached as exc:
            log.warning("job %s (%s): %s; failing the attempt", job.id, job.type, exc)
            return Fail(job.lease_id, "SnoozeLimitReached", str(exc))
        except (LeaseLost, LeaseNotFound) as exc:
            job.lease_lost = True
            log.warning("job %s: lease lost (%s); dropping it", job.id, exc)
            return None
        log.info(
            "job %s (%s) snoozed for %gs",
            job.id, job.type, seconds,
            extra=_fields(job, "job.snoozed", started, seconds=seconds),
        )  # fmt: skip
        return None

    async def within_timeout(self, handler: HandlerFunc, job: Job) -> Any:
        """The handler's result; `_TimedOut` when it ran past the job's timeout: it is
        told (`job.timed_out`; an async one is cancelled), given `timeout_grace_seconds`
        to stop, then abandoned."""
        if inspect.iscoroutinefunction(handler):
            run: asyncio.Future[Any] = asyncio.ensure_future(handler(job))
        else:
            run = asyncio.ensure_future(self.in_thread(handler, job))
        if job._deadline is None:
            return await run
        try:
            done, _ = await asyncio.wait({run}, timeout=max(0.0, job._deadline - self.loop.time()))
        except asyncio.CancelledError:
            run.cancel()  # released by drain(): the handler goes with it, as without a timeout
            raise
        if done:
            return run.result()
        job._timed_out = True
        run.cancel()
        await asyncio.wait({run}, timeout=self.worker.timeout_grace_seconds)
        if run.done() and not run.cancelled():
            run.exception()  # what it raised on its way out is of no use now
        raise _TimedOut

    async def in_thread(self, handler: HandlerFunc, job: Job) -> Any:
        """Run a plain function in a daemon thread: one stuck past the grace period
        cannot keep the process from exiting, unlike an executor's threads."""
        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()  # released jobs' threads may still finish
        context = contextvars.copy_context()

        def target() -> None:
            try:
                result = context.run(handler, job)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=target, name=f"jobq-job-{job.id}", daemon=True).start()
        return await asyncio.wrap_future(future)

    def beat_interval(self, job: Job) -> float:
        return (self.worker.lease_seconds or job.record.lease_seconds) / 3

    async def heartbeat_loop(self, job: Job) -> None:
        while True:
            delay = job._next_beat - self.loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
                continue
            try:
                await self.beat(job)
            except (LeaseLost, LeaseNotFound):
                return  # beat() marked the job; its handler learns it on progress()
            except JobqError as exc:
                log.warning("job %s: heartbeat failed (%s); retrying", job.id, exc)
                job._next_beat = self.loop.time() + HEARTBEAT_RETRY_SECONDS

    async def beat(
        self,
        job: Job,
        *,
        percent: float | None = None,
        stage: str | None = None,
        message: str | None = None,
    ) -> None:
        try:
            answer = await self.send(
                _calls.heartbeat(
                    job.lease_id, extend_seconds=None, percent=percent, stage=stage,
                    message=message,
                )
            )  # fmt: skip
        except (LeaseLost, LeaseNotFound):
            job.lease_lost = True
            raise
        job.expires_at = answer.expires_at
        job._next_beat = self.loop.time() + self.beat_interval(job)
        if answer.cancel_requested and not job._cancel_requested:
            log.info("job %s: cancellation requested", job.id)
            job._cancel_requested = True

    # ---- stopping --------------------------------------------------------------------

    async def drain(self) -> None:
        grace = self.worker.grace_seconds
        if self.running:
            log.info("waiting up to %gs for %d running jobs", grace, len(self.running))
        deadline = self.loop.time() + grace
        while self.running and not self.forced.is_set():
            remaining = deadline - self.loop.time()
            if remaining <= 0:
                break
            self.slot_free.clear()
            await _wait_any(self.slot_free, self.forced, within=remaining)
        if not self.running:
            return
        log.warning("releasing %d jobs still running", len(self.running))
        tasks = []
        for job, task in list(self.running.values()):
            job.released = True
            task.cancel()
            tasks.append(task)
            self.add_ack(
                Fail(
                    job.lease_id,
                    SHUTDOWN_ERROR_TYPE,
                    "the worker stopped before the job finished",
                    retryable=True,
                    retry_after_seconds=0,
                )
            )
        # Async handlers get CancelledError; threads run on as daemons, ignored.
        await asyncio.wait(tasks, timeout=RELEASE_WAIT_SECONDS)

    # ---- acknowledging ---------------------------------------------------------------

    def add_ack(self, ack: Ack) -> None:
        self.pending_acks.append(ack)
        self.ack_added.set()

    async def ack_loop(self) -> None:
        """Send finished jobs in batches: every `ack_interval_seconds`, or when full."""
        worker = self.worker
        while True:
            if not self.pending_acks:
                if self.closing:
                    return
                self.ack_added.clear()
                await self.ack_added.wait()
                continue
            if len(self.pending_acks) < worker.ack_batch_size and not self.closing:
                await asyncio.sleep(worker.ack_interval_seconds)
            batch = self.pending_acks[: worker.ack_batch_size]
            del self.pending_acks[: len(batch)]
            if not await self.send_acks(batch):
                if self.closing:
                    log.error("could not acknowledge %d jobs; their leases will lapse", len(batch))
                    continue
                self.pending_acks[:0] = batch
                await asyncio.sleep(HEARTBEAT_RETRY_SECONDS)

    async def ack_and_lease(self, free: int) -> list[Lease]:
        """Send the pending acks with a lease of up to `free` jobs, without waiting for
        one: the leases. When the call fails, the acks go back to the ack loop, which
        sends them on their own (and a lease refused for good is refused again there)."""
        worker = self.worker
        batch = self.pending_acks[: worker.ack_batch_size]
        del self.pending_acks[: len(batch)]
        try:
            results, leases = await self.send_leasing(
                _calls.ack_and_lease(
                    batch,
                    worker.queues,
                    worker_id=worker.worker_id,
                    max_jobs=free,
                    types=sorted(worker.handlers),
                    lease_seconds=worker.lease_seconds,
                    wait_seconds=0,
                )
            )
        except JobqError as exc:
            log.warning("acknowledging %d jobs with a lease failed: %s", len(batch), exc)
            self.pending_acks[:0] = batch
            self.ack_added.set()
            return []
        self.pending_acks[:0] = await self.judged(batch, results)
        return leases

    async def send_acks(self, batch: list[Ack]) -> bool:
        """True once the service has judged every ack; False to try again later."""
        try:
            results = await self.send(_calls.ack(batch))
        except (PayloadTooLarge, ValidationError) as exc:
            # The batch as a whole was refused (too large a request, or a service that
            # judges results per batch): send them one by one.
            if len(batch) == 1:
                return await self.send_refused(batch[0], exc)
            failed = [ack for ack in batch if not await self.send_acks([ack])]
            self.pending_acks[:0] = failed
            return True
        except JobqError as exc:
            log.warning("acknowledging %d jobs failed: %s", len(batch), exc)
            return False
        self.pending_acks[:0] = await self.judged(batch, results)
        return True

    async def judged(self, batch: list[Ack], results: list[AckResult]) -> list[Ack]:
        """Act on each ack's result: an outcome refused on its own (too large, too deep)
        is sent again as a plain failure; the acks still to send."""
        unsent: list[Ack] = []
        for ack, result in zip(batch, results, strict=True):
            if result.status in (413, 422):  # this ack's result or error was refused
                refused = error_class(result.status, result.code)(
                    status=result.status, code=result.code
                )
                if not await self.send_refused(ack, refused):
                    unsent.append(ack)
            elif not result.ok:
                log.warning("ack of %s: %s %s (job %s is %s)", result.lease_id, result.status,
                            result.code, result.job_id, result.state)  # fmt: skip
        return unsent

    async def send_refused(self, ack: Ack, exc: JobqError) -> bool:
        if isinstance(ack, Fail) and ack.details is None:
            log.error("the service refused the failure of %s: %s", ack.lease_id, exc)
            return True
        log.warning("the service refused the outcome of %s (%s); failing it", ack.lease_id, exc)
        replacement = Fail(ack.lease_id, type(exc).__name__, str(exc), retryable=False)
        return await self.send_acks([replacement])
