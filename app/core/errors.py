"""The errors jobq raises on purpose.

Each one knows its HTTP status and its stable machine `code`; the API layer turns
them into `application/problem+json` in one handler. The service and repository
raise them and know nothing of HTTP: an error about a field names it by its path in
what the service was given (`("max_jobs",)`, `("acks", 3, "result")`), and the API
places it in the request (`within("body")`).

    JobqError
    ├── BadRequest (400)
    │   └── InvalidJson
    ├── Unauthorized (401)
    ├── Forbidden (403)
    │   └── LeaseForbidden
    ├── NotFound (404)
    │   ├── JobNotFound
    │   ├── LeaseNotFound
    │   ├── KeyNotFound
    │   ├── ScheduleNotFound
    │   ├── SubscriptionNotFound
    │   └── WorkerNotFound
    ├── Conflict (409)
    │   ├── LeaseLost
    │   │   └── ExecutionTimeout
    │   ├── SnoozeLimitReached
    │   ├── KeyExists
    │   ├── JobFinished
    │   ├── JobNotRetryable
    │   │   ├── ParentEnded
    │   │   └── UniqueHeld
    │   └── JobRunning
    ├── Gone (410)
    │   └── EventsExpired
    ├── PayloadTooLarge (413)
    ├── ValidationFailed (422)
    │   ├── ConfirmationMismatch
    │   └── TargetNotAllowed
    ├── TooManyRequests (429, with Retry-After)
    │   └── QueueFull
    └── Unavailable (503)
        ├── DatabaseUnavailable
        └── ReaperStalled
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from app.core.names import PATTERN_RULES

Loc = tuple[str | int, ...]  # a field's path: names of members, places in arrays


class JobqError(Exception):
    """Something went wrong in jobq."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"
    title: ClassVar[str] = "Internal error"

    def __init__(self, detail: str | None = None, **extra: Any) -> None:
        self.detail = detail or (self.__doc__ or self.title).strip()
        self.extra = extra
        super().__init__(self.detail)

    def headers(self) -> dict[str, str]:
        """HTTP headers the answer carries besides the problem body (e.g. Retry-After)."""
        return {}

    def within(self, *prefix: str | int) -> JobqError:
        """This error about a value found at `prefix` of a larger one (the request: the
        API adds `"body"`): the fields it names are then named from there. An error that
        names no field is itself."""
        return self


class BadRequest(JobqError):
    """The request could not be understood."""

    status = 400
    code = "bad_request"
    title = "Bad request"


class InvalidJson(BadRequest):
    """The request body is not valid JSON."""

    code = "invalid_json"
    title = "Invalid JSON"


class NotFound(JobqError):
    """Nothing exists at this address."""

    status = 404
    code = "not_found"
    title = "Not found"


class JobNotFound(NotFound):
    """No job has this id."""

    code = "job_not_found"
    title = "Job not found"


class LeaseNotFound(NotFound):
    """No lease with this id was ever issued."""

    code = "lease_not_found"
    title = "Lease not found"


class Conflict(JobqError):
    """The request conflicts with the resource's current state."""

    status = 409
    code = "conflict"
    title = "Conflict"


class LeaseLost(Conflict):
    """This lease no longer holds the job: it expired, was replaced, or finished otherwise."""

    code = "lease_lost"
    title = "Lease lost"


class SnoozeLimitReached(Conflict):
    """The job has snoozed as many times as allowed (JOBQ_MAX_SNOOZES): complete or fail it."""

    code = "snooze_limit_reached"
    title = "Snooze limit reached"


class ExecutionTimeout(LeaseLost):
    """This attempt ran past the job's timeout_seconds: the service fails it as `timeout`."""

    code = "execution_timeout"
    title = "Execution timeout"


class Gone(JobqError):
    """What was asked for is no longer kept."""

    status = 410
    code = "gone"
    title = "Gone"


class EventsExpired(Gone):
    """The events after this position are no longer kept: read the current state again,
    then follow the stream from now (no `Last-Event-ID`)."""

    code = "events_expired"
    title = "Events expired"


class PayloadTooLarge(JobqError):
    """The payload or request body is larger than the configured limit."""

    status = 413
    code = "payload_too_large"
    title = "Payload too large"
    field: Loc | None = None  # the field too large, when one is (`of_field`)

    @classmethod
    def of_field(cls, field: Loc, size_bytes: int, limit_bytes: int) -> PayloadTooLarge:
        """`field` holds `size_bytes` of JSON, more than `limit_bytes`."""
        error = cls(
            f"{_path(field)} is {size_bytes} bytes of JSON; the limit is {limit_bytes}",
            limit_bytes=limit_bytes,
            size_bytes=size_bytes,
        )
        error.field = field
        return error

    def within(self, *prefix: str | int) -> PayloadTooLarge:
        if self.field is None:
            return self
        field = (*prefix, *self.field)
        return self.of_field(field, self.extra["size_bytes"], self.extra["limit_bytes"])


class ValidationFailed(JobqError):
    """One or more fields are invalid."""

    status = 422
    code = "validation_error"
    title = "Validation error"

    at: Loc = ()  # where the fields' paths begin (`within`)
    listed = False  # the detail names each field (`of`): moving them rewrites it

    @classmethod
    def field(cls, loc: Loc, msg: str, type_: str) -> ValidationFailed:
        """One offending field, in the same shape as a schema validation error."""
        return cls(msg, errors=[{"loc": list(loc), "msg": msg, "type": type_}])

    @classmethod
    def of(cls, errors: Iterable[Mapping[str, Any]]) -> ValidationFailed:
        """Pydantic's errors of a model validated outside a request; the detail lists
        each field with its message."""
        listed = field_errors(errors)
        failed = cls(_listing(listed, ()), errors=listed)
        failed.listed = True
        return failed

    def within(self, *prefix: str | int) -> ValidationFailed:
        if "errors" not in self.extra:
            return self
        at = (*prefix, *self.at)
        errors = [{**e, "loc": [*prefix, *e["loc"]]} for e in self.extra["errors"]]
        detail = _listing(errors, at) if self.listed else self.detail
        moved = type(self)(detail, **{**self.extra, "errors": errors})
        moved.at, moved.listed = at, self.listed
        return moved


def _path(loc: Loc) -> str:
    return ".".join(map(str, loc))


def _listing(errors: Iterable[Mapping[str, Any]], at: Loc) -> str:
    """Each field's path from `at` with its message (`at` itself for an error about the
    whole value there; the bare message when that is the whole input)."""
    parts = []
    for error in errors:
        path = _path(error["loc"][len(at) :]) or _path(at)
        parts.append(f"{path}: {error['msg']}" if path else str(error["msg"]))
    return "; ".join(parts)


def field_errors(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pydantic's errors as a problem lists them: only what the client needs, never the
    offending input (it may be huge or secret); a name's pattern said in words."""
    return [{"loc": list(e["loc"]), "msg": _message(e), "type": e["type"]} for e in errors]


def _message(error: Mapping[str, Any]) -> str:
    if error["type"] == "string_pattern_mismatch":
        rule = PATTERN_RULES.get(str((error.get("ctx") or {}).get("pattern")))
        if rule is not None:
            return rule
    return str(error["msg"])


class Unavailable(JobqError):
    """The service cannot do its work right now; retry shortly."""

    status = 503
    code = "unavailable"
    title = "Service unavailable"


class DatabaseUnavailable(Unavailable):
    """The database cannot be reached right now; retry shortly."""

    code = "database_unavailable"
    title = "Database unavailable"


class ReaperStalled(Unavailable):
    """The reaper has not finished a pass for several intervals."""

    code = "reaper_stalled"
    title = "Reaper stalled"


# ---- authentication and authorization --------------------------------------------------


class Unauthorized(JobqError):
    """This request needs a valid API key: send `Authorization: Bearer <key>`."""

    status = 401
    code = "unauthorized"
    title = "Unauthorized"

    def __init__(
        self, detail: str | None = None, *, invalid_token: bool = False, key_name: str | None = None
    ) -> None:
        super().__init__(detail)
        # RFC 6750: a challenge on every 401; `invalid_token` when a key was sent but refused.
        self.challenge = 'Bearer realm="jobq"'
        if invalid_token:
            self.challenge += ', error="invalid_token"'
        # The key refused, when the token named one (revoked, or a wrong secret): for the
        # audit log only, never in the answer.
        self.key_name = key_name

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": self.challenge}


class Forbidden(JobqError):
    """This API key may not do this: its scopes or queues do not allow it."""

    status = 403
    code = "forbidden"
    title = "Forbidden"


class LeaseForbidden(Forbidden):
    """This lease was taken with another API key; only that key may act on it."""

    code = "lease_forbidden"
    title = "Lease forbidden"


class KeyNotFound(NotFound):
    """No API key has this name."""

    code = "key_not_found"
    title = "API key not found"


class ScheduleNotFound(NotFound):
    """No schedule has this name."""

    code = "schedule_not_found"
    title = "Schedule not found"


class SubscriptionNotFound(NotFound):
    """No event subscription has this name."""

    code = "subscription_not_found"
    title = "Subscription not found"


class WorkerNotFound(NotFound):
    """No worker with this id was seen lately in the queues this key may see."""

    code = "worker_not_found"
    title = "Worker not found"


class KeyExists(Conflict):
    """An API key with this name already exists (revoked keys keep their names)."""

    code = "key_exists"
    title = "API key exists"


# ---- admin actions ---------------------------------------------------------------------


class JobFinished(Conflict):
    """The job already finished (succeeded or failed): there is nothing left to cancel."""

    code = "job_finished"
    title = "Job finished"


class JobNotRetryable(Conflict):
    """Only a failed or cancelled job can be retried."""

    code = "job_not_retryable"
    title = "Job not retryable"


class ParentEnded(JobNotRetryable):
    """A parent the job waits for failed, was cancelled or was deleted: retried, the job
    would wait for it forever. Retry that parent instead (its dependents follow)."""

    code = "parent_ended"
    title = "Parent ended"


class UniqueHeld(JobNotRetryable):
    """Another job holds this job's uniqueness (its `unique` key, in its period and
    states): retried, the two would break it. Retry this one once that one has finished."""

    code = "unique_held"
    title = "Uniqueness held"


class JobRunning(Conflict):
    """The job is running: cancel it first, then delete it once it has stopped."""

    code = "job_running"
    title = "Job running"


class ConfirmationMismatch(ValidationFailed):
    """The confirmation does not name the queue the action is for."""

    code = "confirmation_mismatch"
    title = "Confirmation mismatch"


class TargetNotAllowed(ValidationFailed):
    """The URL is not a target jobq may deliver to (JOBQ_PUSH_ALLOWED_TARGETS)."""

    code = "target_not_allowed"
    title = "Target not allowed"


class TooManyRequests(JobqError):
    """Too much at once: retry after the time the answer's Retry-After gives."""

    status = 429
    code = "too_many_requests"
    title = "Too many requests"

    def __init__(
        self, detail: str | None = None, *, retry_after_seconds: int, **extra: Any
    ) -> None:
        super().__init__(detail, retry_after_seconds=retry_after_seconds, **extra)
        self.retry_after_seconds = retry_after_seconds

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_seconds)}


class QueueFull(TooManyRequests):
    """The queue already holds its maximum backlog of unfinished jobs; retry later."""

    code = "queue_full"
    title = "Queue full"
