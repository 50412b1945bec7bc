"""`Client` (blocking) and `AsyncClient`: every jobq call, typed, retried when safe.

    with Client("http://127.0.0.1:8000") as jobq:
        job = jobq.enqueue("emails", "send_email", {"to": "ada@example.com"})
        print(jobq.get_job(job.id).state)

Connection errors and 502/503/504 answers are retried with exponential backoff and
jitter (`RetryPolicy`). `on_answer` sees each successful answer's JSON as the service
sent it, beside the model read from it (the `jobq` command prints it for
`--output json`). An answer that is not what jobq sends (not JSON, or not its shape)
raises `JobqError`. Every call is safe to repeat: an enqueue always carries an
idempotency key (a random one when the caller gives none), so a retried enqueue whose
first try was committed returns that job instead of making a second one; finishing
calls answer a repeat with the same job.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx

from jobq_client import _calls
from jobq_client._calls import Call
from jobq_client._errors import ConnectionFailed, JobqError, error_from_response
from jobq_client._events import (
    EVENTS_PATH,
    READ_TIMEOUT_SECONDS,
    Event,
    Follower,
    backoff,
    headers,
    query,
)
from jobq_client._models import (
    Ack,
    AckResult,
    BatchItem,
    Enqueued,
    Heartbeat,
    JobRecord,
    JobsPage,
    JobSpec,
    JobState,
    Lease,
    OnParentFailure,
    TraceContext,
    Unique,
)
from jobq_client._operations import AsyncOperations, Operations

T = TypeVar("T")
log = logging.getLogger("jobq_client")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_TIMEOUT_SECONDS = 10.0
DEFAULT_WAIT_SECONDS = 60.0
MAX_WAIT_SECONDS = 30.0  # the service's bound on one wait
URL_ENV = "JOBQ_URL"
HOST_ENV = "JOBQ_HOST"
PORT_ENV = "JOBQ_PORT"
API_KEY_ENV = "JOBQ_API_KEY"
# Where a client reaches a service bound to a wildcard address (all interfaces).
_WILDCARD_HOSTS = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}  # noqa: S104
# Errors of the request itself, not of the network: retrying cannot help.
_NOT_TRANSIENT = (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.InvalidURL)
# What reading an answer that jobq did not send raises (not JSON, or not its shape).
_UNREADABLE = (ValueError, KeyError, TypeError)
AnswerHook = Callable[[Any], None]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a call is retried after a connection error or a 503.

    The n-th retry waits a random time between half and all of
    `min(max_backoff_seconds, backoff_seconds * 2**n)`, or what the answer's
    `Retry-After` asks if that is longer (up to `max_backoff_seconds`).
    `RetryPolicy(max_retries=0)` never retries.
    """

    max_retries: int = 4
    backoff_seconds: float = 0.2
    max_backoff_seconds: float = 5.0

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        ceiling = min(self.max_backoff_seconds, self.backoff_seconds * 2.0**retry)
        wait = ceiling / 2 + random.uniform(0, ceiling / 2)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_backoff_seconds))
        return wait


def service_url(environ: Mapping[str, str] | None = None) -> str:
    """The service a client calls when given no URL, found as the `jobq` command finds it
    (a test holds the two equal): `JOBQ_URL`, else `http://JOBQ_HOST:JOBQ_PORT`, a
    wildcard host reached on loopback; so a worker beside `JOBQ_PORT=18810 jobq serve`
    reaches it with the same environment."""
    env = os.environ if environ is None else environ
    if env.get(URL_ENV):
        return env[URL_ENV]
    host = env.get(HOST_ENV, DEFAULT_HOST)
    bracketed = f"[{host}]" if ":" in host and not host.startswith("[") else host
    host = _WILDCARD_HOSTS.get(host, bracketed)
    return f"http://{host}:{env.get(PORT_ENV) or DEFAULT_PORT}"


def _retry_after(response: httpx.Response | None) -> float | None:
    if response is None:
        return None
    value: str = response.headers.get("retry-after", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class _Base:
    """Configuration and request building shared by both clients."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        retry: RetryPolicy | None = None,
        headers: dict[str, str] | None = None,
        on_answer: AnswerHook | None = None,
    ) -> None:
        self.base_url = (base_url or service_url()).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.on_answer = on_answer
        self._headers = {"Accept": "application/json", **(headers or {})}
        if self.api_key:
            self._headers["Authorization"] = f"Bearer {self.api_key}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    def _request(self, call: Call[Any]) -> dict[str, Any]:
        request: dict[str, Any] = {
            "method": call.method,
            "url": call.path,
            "params": call.params,
            "timeout": max(self.timeout, call.min_timeout or 0),
        }
        if call.has_body:
            request["json"] = call.body
        if call.headers:
            request["headers"] = call.headers
        return request

    def _outcome(self, call: Call[T], response: httpx.Response) -> T | JobqError:
        if not response.is_success:
            return error_from_response(response)
        try:
            parsed = call.parse(response)
        except _UNREADABLE:
            where = f"{self.base_url}{call.path}"
            return JobqError(f"the answer from {where} is not jobq's (is {self.base_url} jobq?)")
        if self.on_answer is not None and response.content:
            self.on_answer(response.json())
        return parsed

    def _give_up(self, error: JobqError, retry: int) -> bool:
        return not error.retryable or retry >= self.retry.max_retries

    def _log_retry(self, call: Call[Any], error: JobqError, wait: float, retry: int) -> None:
        log.warning(
            "%s %s: %s; retry %d/%d in %.2fs",
            call.method,
            call.path,
            error,
            retry + 1,
            self.retry.max_retries,
            wait,
        )


def _wait_seconds(left: float) -> float:
    """One long poll's wait: what is left, at most what the service allows."""
    return round(min(max(left, 0.0), MAX_WAIT_SECONDS), 3)


def _connection_failed(base_url: str, exc: httpx.TransportError) -> ConnectionFailed:
    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return ConnectionFailed(f"jobq at {base_url} did not answer ({reason})")


class Client(_Base, Operations):
    """A blocking jobq client. Its URL defaults to `JOBQ_URL`, else `JOBQ_HOST` and
    `JOBQ_PORT`; its key to `JOBQ_API_KEY`. `on_answer`, if given, is called with the
    JSON of each successful answer that has a body, as the service sent it.

    with Client("http://127.0.0.1:8000", api_key="...") as jobq:
        created = jobq.enqueue("images", "resize", {"path": "a.png"})
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        retry: RetryPolicy | None = None,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        on_answer: AnswerHook | None = None,
    ) -> None:
        super().__init__(
            base_url,
            api_key=api_key,
            timeout=timeout,
            retry=retry,
            headers=headers,
            on_answer=on_answer,
        )
        self._http = httpx.Client(
            base_url=self.base_url, headers=self._headers, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, call: Call[T]) -> T:
        retry = 0
        while True:
            response: httpx.Response | None = None
            cause: BaseException | None = None
            try:
                response = self._http.request(**self._request(call))
            except _NOT_TRANSIENT:
                raise
            except httpx.TransportError as exc:
                outcome: T | JobqError = _connection_failed(self.base_url, exc)
                cause = exc
            else:
                outcome = self._outcome(call, response)
            if not isinstance(outcome, JobqError):
                return outcome
            if self._give_up(outcome, retry):
                raise outcome from cause
            wait = self.retry.delay(retry, _retry_after(response))
            self._log_retry(call, outcome, wait, retry)
            time.sleep(wait)
            retry += 1

    # ---- producers and readers ------------------------------------------------------

    def enqueue(
        self,
        queue: str,
        type: str,
        payload: Any = None,
        *,
        priority: int | None = None,
        run_at: datetime | None = None,
        delay_seconds: float | None = None,
        max_attempts: int | None = None,
        lease_seconds: int | None = None,
        idempotency_key: str | None = None,
        metadata: dict[str, Any] | None = None,
        depends_on: list[int] | None = None,
        on_parent_failure: OnParentFailure | None = None,
        concurrency_key: str | None = None,
        fairness_key: str | None = None,
        unique: Unique | None = None,
        timeout_seconds: int | None = None,
        start_by: datetime | None = None,
        trace: TraceContext | None = None,
    ) -> Enqueued:
        """Enqueue one job; a job that already had this idempotency key or uniqueness
        (`unique`) comes back as is (or replaced: `Unique(on_conflict="replace")`).
        With `depends_on`, it waits until those jobs succeeded (`on_parent_failure`: what
        their failure does to it). A fair queue takes turns across `fairness_key`s.
        `timeout_seconds` bounds each attempt; a job not leased by `start_by` never is (it
        ends cancelled as `expired`). Its trace context is `trace`, else the current
        OpenTelemetry span's (with `jobq-client[otel]`)."""
        spec = JobSpec(
            type, payload, priority, run_at, delay_seconds, max_attempts, lease_seconds,
            idempotency_key, metadata, depends_on, on_parent_failure, concurrency_key,
            fairness_key, unique, timeout_seconds, start_by, trace,
        )  # fmt: skip
        return self._call(_calls.enqueue(queue, spec))

    def enqueue_many(self, queue: str, jobs: Iterable[JobSpec]) -> list[BatchItem]:
        """Enqueue up to 1000 jobs in one call; the answer is in request order."""
        return self._call(_calls.enqueue_many(queue, jobs))

    def get_job(self, job_id: int) -> JobRecord:
        """A job with its progress, result, errors and attempts."""
        return self._call(_calls.get_job(job_id))

    def wait(self, job_id: int, timeout: float = DEFAULT_WAIT_SECONDS) -> JobRecord:
        """The job once it finished (succeeded, failed or cancelled), or as it is when
        `timeout` seconds passed: look at `.finished`. Long polls, no busy loop."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            job = self._call(_calls.get_job(job_id, _wait_seconds(left)))
            if job.finished or left <= 0:
                return job

    def run(
        self, queue: str, type: str, payload: Any = None, *, timeout: float = 60.0, **job: Any
    ) -> JobRecord:
        """Enqueue a job (with `enqueue`'s keyword arguments), then `wait` for it."""
        return self.wait(self.enqueue(queue, type, payload, **job).id, timeout)

    def list_jobs(
        self,
        *,
        queue: str | None = None,
        state: JobState | None = None,
        type: str | None = None,
        limit: int | None = None,
        after: int | None = None,
    ) -> JobsPage:
        """One page of jobs in id order; pass `next_after` as `after` for the next."""
        return self._call(
            _calls.list_jobs(queue=queue, state=state, type=type, limit=limit, after=after)
        )

    def iter_jobs(
        self,
        *,
        queue: str | None = None,
        state: JobState | None = None,
        type: str | None = None,
        page_size: int = 100,
    ) -> Iterator[JobRecord]:
        """Every matching job, fetching page after page."""
        after: int | None = 0
        while after is not None:
            page = self.list_jobs(queue=queue, state=state, type=type, limit=page_size, after=after)
            yield from page.jobs
            after = page.next_after

    def cancel_job(self, job_id: int) -> JobRecord:
        """Cancel a job: a queued one at once, a running one when its worker stops."""
        return self._call(_calls.cancel_job(job_id))

    # ---- workers --------------------------------------------------------------------

    def lease(
        self,
        queues: Sequence[str],
        *,
        worker_id: str,
        max_jobs: int = 1,
        types: Sequence[str] = (),
        lease_seconds: int | None = None,
        wait_seconds: float = 0,
    ) -> list[Lease]:
        """Lease up to `max_jobs` due jobs; with `wait_seconds`, wait for one (long poll)."""
        return self._call(
            _calls.lease(
                queues,
                worker_id=worker_id,
                max_jobs=max_jobs,
                types=types,
                lease_seconds=lease_seconds,
                wait_seconds=wait_seconds,
            )
        )

    def heartbeat(
        self,
        lease_id: str,
        *,
        extend_seconds: int | None = None,
        percent: float | None = None,
        stage: str | None = None,
        message: str | None = None,
    ) -> Heartbeat:
        """Extend a lease from now, optionally reporting progress."""
        return self._call(
            _calls.heartbeat(
                lease_id,
                extend_seconds=extend_seconds,
                percent=percent,
                stage=stage,
                message=message,
            )
        )

    def complete(self, lease_id: str, result: Any = None) -> JobRecord:
        """The job succeeded, with this result."""
        return self._call(_calls.complete(lease_id, result))

    def fail(
        self,
        lease_id: str,
        error_type: str,
        message: str = "",
        *,
        details: Any = None,
        retryable: bool = True,
        retry_after_seconds: float | None = None,
    ) -> JobRecord:
        """The attempt failed: retried after a backoff, or failed for good."""
        return self._call(
            _calls.fail(
                lease_id,
                error_type=error_type,
                message=message,
                details=details,
                retryable=retryable,
                retry_after_seconds=retry_after_seconds,
            )
        )

    def snooze(self, lease_id: str, seconds: float) -> JobRecord:
        """Run the leased job again `seconds` from now, spending no attempt."""
        return self._call(_calls.snooze(lease_id, seconds))

    def ack(self, acks: Iterable[Ack]) -> list[AckResult]:
        """Complete or fail many leases in one call; one result per ack, in order."""
        return self._call(_calls.ack(acks))

    def ack_and_lease(
        self,
        acks: Iterable[Ack],
        queues: Sequence[str],
        *,
        worker_id: str,
        max_jobs: int = 1,
        types: Sequence[str] = (),
        lease_seconds: int | None = None,
        wait_seconds: float = 0,
    ) -> tuple[list[AckResult], list[Lease]]:
        """`ack`, then `lease` in the same call (complete-and-lease): the acks' results
        and the leases. A limited queue's slots the acks freed are there to take."""
        return self._call(
            _calls.ack_and_lease(
                acks,
                queues,
                worker_id=worker_id,
                max_jobs=max_jobs,
                types=types,
                lease_seconds=lease_seconds,
                wait_seconds=wait_seconds,
            )
        )

    def events(
        self,
        *,
        queues: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        kinds: Iterable[str] | None = None,
        last_event_id: int | None = None,
    ) -> Generator[Event]:
        """Job and queue events as they happen (`GET /v1/events`), from now or after
        `last_event_id`; reconnects and resumes by itself (see `jobq_client._events`)."""
        follower = Follower(last_event_id)
        params = query(queues, types, kinds)
        timeout = httpx.Timeout(self.timeout, read=READ_TIMEOUT_SECONDS)
        failures = 0
        while True:
            try:
                with self._http.stream(
                    "GET",
                    EVENTS_PATH,
                    params=params,
                    headers=headers(follower.last_event_id),
                    timeout=timeout,
                ) as response:
                    if not response.is_success:
                        response.read()
                        raise error_from_response(response)
                    for line in response.iter_lines():
                        event = follower.take(line)
                        if event is not None:
                            failures = 0
                            yield event
            except httpx.TransportError as exc:
                if isinstance(exc, _NOT_TRANSIENT):
                    raise
            except JobqError as error:
                if not error.retryable:
                    raise
            time.sleep(backoff(failures))
            failures += 1


class AsyncClient(_Base, AsyncOperations):
    """The asyncio twin of `Client`, with the same methods as coroutines.

    async with AsyncClient("http://127.0.0.1:8000") as jobq:
        created = await jobq.enqueue("images", "resize", {"path": "a.png"})
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        retry: RetryPolicy | None = None,
        headers: dict[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        on_answer: AnswerHook | None = None,
    ) -> None:
        super().__init__(
            base_url,
            api_key=api_key,
            timeout=timeout,
            retry=retry,
            headers=headers,
            on_answer=on_answer,
        )
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=self._headers, transport=transport
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _call(self, call: Call[T]) -> T:
        retry = 0
        while True:
            response: httpx.Response | None = None
            cause: BaseException | None = None
            try:
                response = await self._http.request(**self._request(call))
            except _NOT_TRANSIENT:
                raise
            except httpx.TransportError as exc:
                outcome: T | JobqError = _connection_failed(self.base_url, exc)
                cause = exc
            else:
                outcome = self._outcome(call, response)
            if not isinstance(outcome, JobqError):
                return outcome
            if self._give_up(outcome, retry):
                raise outcome from cause
            wait = self.retry.delay(retry, _retry_after(response))
            self._log_retry(call, outcome, wait, retry)
            await asyncio.sleep(wait)
            retry += 1

    async def enqueue(
        self,
        queue: str,
        type: str,
        payload: Any = None,
        *,
        priority: int | None = None,
        run_at: datetime | None = None,
        delay_seconds: float | None = None,
        max_attempts: int | None = None,
        lease_seconds: int | None = None,
        idempotency_key: str | None = None,
        metadata: dict[str, Any] | None = None,
        depends_on: list[int] | None = None,
        on_parent_failure: OnParentFailure | None = None,
        concurrency_key: str | None = None,
        fairness_key: str | None = None,
        unique: Unique | None = None,
        timeout_seconds: int | None = None,
        start_by: datetime | None = None,
        trace: TraceContext | None = None,
    ) -> Enqueued:
        """Enqueue one job; a job that already had this idempotency key or uniqueness
        (`unique`) comes back as is (or replaced: `Unique(on_conflict="replace")`).
        With `depends_on`, it waits until those jobs succeeded (`on_parent_failure`: what
        their failure does to it). A fair queue takes turns across `fairness_key`s.
        `timeout_seconds` bounds each attempt; a job not leased by `start_by` never is (it
        ends cancelled as `expired`). Its trace context is `trace`, else the current
        OpenTelemetry span's (with `jobq-client[otel]`)."""
        spec = JobSpec(
            type, payload, priority, run_at, delay_seconds, max_attempts, lease_seconds,
            idempotency_key, metadata, depends_on, on_parent_failure, concurrency_key,
            fairness_key, unique, timeout_seconds, start_by, trace,
        )  # fmt: skip
        return await self._call(_calls.enqueue(queue, spec))

    async def enqueue_many(self, queue: str, jobs: Iterable[JobSpec]) -> list[BatchItem]:
        """Enqueue up to 1000 jobs in one call; the answer is in request order."""
        return await self._call(_calls.enqueue_many(queue, jobs))

    async def get_job(self, job_id: int) -> JobRecord:
        """A job with its progress, result, errors and attempts."""
        return await self._call(_calls.get_job(job_id))

    async def wait(self, job_id: int, timeout: float = DEFAULT_WAIT_SECONDS) -> JobRecord:
        """The job once it finished (succeeded, failed or cancelled), or as it is when
        `timeout` seconds passed: look at `.finished`. Long polls, no busy loop."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            job = await self._call(_calls.get_job(job_id, _wait_seconds(left)))
            if job.finished or left <= 0:
                return job

    async def run(
        self, queue: str, type: str, payload: Any = None, *, timeout: float = 60.0, **job: Any
    ) -> JobRecord:
        """Enqueue a job (with `enqueue`'s keyword arguments), then `wait` for it."""
        return await self.wait((await self.enqueue(queue, type, payload, **job)).id, timeout)

    async def list_jobs(
        self,
        *,
        queue: str | None = None,
        state: JobState | None = None,
        type: str | None = None,
        limit: int | None = None,
        after: int | None = None,
    ) -> JobsPage:
        """One page of jobs in id order; pass `next_after` as `after` for the next."""
        return await self._call(
            _calls.list_jobs(queue=queue, state=state, type=type, limit=limit, after=after)
        )

    async def iter_jobs(
        self,
        *,
        queue: str | None = None,
        state: JobState | None = None,
        type: str | None = None,
        page_size: int = 100,
    ) -> AsyncIterator[JobRecord]:
        """Every matching job, fetching page after page."""
        after: int | None = 0
        while after is not None:
            page = await self.list_jobs(
                queue=queue, state=state, type=type, limit=page_size, after=after
            )
            for job in page.jobs:
                yield job
            after = page.next_after

    async def cancel_job(self, job_id: int) -> JobRecord:
        """Cancel a job: a queued one at once, a running one when its worker stops."""
        return await self._call(_calls.cancel_job(job_id))

    async def lease(
        self,
        queues: Sequence[str],
        *,
        worker_id: str,
        max_jobs: int = 1,
        types: Sequence[str] = (),
        lease_seconds: int | None = None,
        wait_seconds: float = 0,
    ) -> list[Lease]:
        """Lease up to `max_jobs` due jobs; with `wait_seconds`, wait for one (long poll)."""
        return await self._call(
            _calls.lease(
                queues,
                worker_id=worker_id,
                max_jobs=max_jobs,
                types=types,
                lease_seconds=lease_seconds,
                wait_seconds=wait_seconds,
            )
        )

    async def heartbeat(
        self,
        lease_id: str,
        *,
        extend_seconds: int | None = None,
        percent: float | None = None,
        stage: str | None = None,
        message: str | None = None,
    ) -> Heartbeat:
        """Extend a lease from now, optionally reporting progress."""
        return await self._call(
            _calls.heartbeat(
                lease_id,
                extend_seconds=extend_seconds,
                percent=percent,
                stage=stage,
                message=message,
            )
        )

    async def complete(self, lease_id: str, result: Any = None) -> JobRecord:
        """The job succeeded, with this result."""
        return await self._call(_calls.complete(lease_id, result))

    async def fail(
        self,
        lease_id: str,
        error_type: str,
        message: str = "",
        *,
        details: Any = None,
        retryable: bool = True,
        retry_after_seconds: float | None = None,
    ) -> JobRecord:
        """The attempt failed: retried after a backoff, or failed for good."""
        return await self._call(
            _calls.fail(
                lease_id,
                error_type=error_type,
                message=message,
                details=details,
                retryable=retryable,
                retry_after_seconds=retry_after_seconds,
            )
        )

    async def snooze(self, lease_id: str, seconds: float) -> JobRecord:
        """Run the leased job again `seconds` from now, spending no attempt."""
        return await self._call(_calls.snooze(lease_id, seconds))

    async def ack(self, acks: Iterable[Ack]) -> list[AckResult]:
        """Complete or fail many leases in one call; one result per ack, in order."""
        return await self._call(_calls.ack(acks))

    async def ack_and_lease(
        self,
        acks: Iterable[Ack],
        queues: Sequence[str],
        *,
        worker_id: str,
        max_jobs: int = 1,
        types: Sequence[str] = (),
        lease_seconds: int | None = None,
        wait_seconds: float = 0,
    ) -> tuple[list[AckResult], list[Lease]]:
        """`ack`, then `lease` in the same call (complete-and-lease): the acks' results
        and the leases. A limited queue's slots the acks freed are there to take."""
        return await self._call(
            _calls.ack_and_lease(
                acks,
                queues,
                worker_id=worker_id,
                max_jobs=max_jobs,
                types=types,
                lease_seconds=lease_seconds,
                wait_seconds=wait_seconds,
            )
        )

    async def events(
        self,
        *,
        queues: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        kinds: Iterable[str] | None = None,
        last_event_id: int | None = None,
    ) -> AsyncGenerator[Event]:
        """Job and queue events as they happen (`GET /v1/events`), from now or after
        `last_event_id`; reconnects and resumes by itself (see `jobq_client._events`)."""
        follower = Follower(last_event_id)
        params = query(queues, types, kinds)
        timeout = httpx.Timeout(self.timeout, read=READ_TIMEOUT_SECONDS)
        failures = 0
        while True:
            try:
                async with self._http.stream(
                    "GET",
                    EVENTS_PATH,
                    params=params,
                    headers=headers(follower.last_event_id),
                    timeout=timeout,
                ) as response:
                    if not response.is_success:
                        await response.aread()
                        raise error_from_response(response)
                    async for line in response.aiter_lines():
                        event = follower.take(line)
                        if event is not None:
                            failures = 0
                            yield event
            except httpx.TransportError as exc:
                if isinstance(exc, _NOT_TRANSIENT):
                    raise
            except JobqError as error:
                if not error.retryable:
                    raise
            await asyncio.sleep(backoff(failures))
            failures += 1
