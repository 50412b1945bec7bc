"""The errors the client raises, one class per problem `code` the service sends.

Every error answer of jobq is `application/problem+json` with a stable `code`; the
client raises the class registered for that code, or else the one for the HTTP
status, or else `JobqError` itself. Catch by class, not by message.

    JobqError                  status, code, detail, problem
    ├── ConnectionFailed       no answer (connection refused, reset, timed out)
    ├── BadRequest (400)
    │   └── InvalidJson
    ├── Unauthorized (401)
    ├── Forbidden (403)
    │   └── LeaseForbidden     the lease was taken with another API key
    ├── NotFound (404)
    │   ├── JobNotFound
    │   ├── LeaseNotFound
    │   ├── KeyNotFound
    │   ├── ScheduleNotFound
    │   ├── SubscriptionNotFound
    │   └── WorkerNotFound
    ├── MethodNotAllowed (405)
    ├── Conflict (409)
    │   ├── LeaseLost          job_id, state: where the job is now
    │   │   └── ExecutionTimeout   the attempt ran past the job's timeout_seconds
    │   ├── SnoozeLimitReached the job snoozed JOBQ_MAX_SNOOZES times: finish it
    │   ├── KeyExists
    │   ├── JobFinished        nothing left to cancel
    │   ├── JobNotRetryable    only failed or cancelled jobs can be retried
    │   │   ├── ParentEnded    a parent it waits for ended for good: retry that one
    │   │   └── UniqueHeld     another job holds its uniqueness: wait for that one
    │   └── JobRunning         cancel it before deleting it
    ├── Gone (410)
    │   └── EventsExpired      resume the event stream from now, not from an old id
    ├── PayloadTooLarge (413)
    ├── UnsupportedMediaType (415)
    ├── ValidationError (422)  errors: [{loc, msg, type}]
    │   ├── ConfirmationMismatch
    │   └── TargetNotAllowed   a push target the service's allowlist refuses
    ├── TooManyRequests (429)  retry_after: seconds the answer asked to wait
    │   └── QueueFull          the queue is at its backlog limit
    ├── InternalError (500)
    └── Unavailable (503)      retried by the client
        ├── DatabaseUnavailable
        └── ReaperStalled

The codes are the service's own (`app/core/errors.py`); a test checks the two agree,
both ways.
"""

from __future__ import annotations

from typing import Any, ClassVar

import httpx


class JobqError(Exception):
    """jobq answered with an error, or could not be reached."""

    default_status: ClassVar[int | None] = None
    default_code: ClassVar[str] = "error"
    retryable: ClassVar[bool] = False  # the client retries these by itself

    def __init__(
        self,
        detail: str | None = None,
        *,
        status: int | None = None,
        code: str | None = None,
        problem: dict[str, Any] | None = None,
    ) -> None:
        self.status = self.default_status if status is None else status
        self.code = code or self.default_code
        self.detail = detail or (type(self).__doc__ or self.code).strip()
        self.problem: dict[str, Any] = problem or {}
        super().__init__(self.detail)

    def __str__(self) -> str:
        where = f"{self.status} " if self.status is not None else ""
        return f"{where}{self.code}: {self.detail}"


class ConnectionFailed(JobqError):
    """jobq could not be reached, or did not answer in time."""

    default_code = "connection_failed"
    retryable = True


class BadRequest(JobqError):
    """The request could not be understood."""

    default_status = 400
    default_code = "bad_request"


class InvalidJson(BadRequest):
    """The request body is not valid JSON."""

    default_code = "invalid_json"


class Unauthorized(JobqError):
    """No valid API key was sent."""

    default_status = 401
    default_code = "unauthorized"


class Forbidden(JobqError):
    """The API key may not do this."""

    default_status = 403
    default_code = "forbidden"


class LeaseForbidden(Forbidden):
    """The lease was taken with another API key; only that key may act on it."""

    default_code = "lease_forbidden"


class NotFound(JobqError):
    """Nothing exists at this address."""

    default_status = 404
    default_code = "not_found"


class JobNotFound(NotFound):
    """No job has this id."""

    default_code = "job_not_found"


class LeaseNotFound(NotFound):
    """No lease with this token was ever issued."""

    default_code = "lease_not_found"


class KeyNotFound(NotFound):
    """No API key has this name."""

    default_code = "key_not_found"


class ScheduleNotFound(NotFound):
    """No schedule has this name."""

    default_code = "schedule_not_found"


class SubscriptionNotFound(NotFound):
    """No event subscription has this name."""

    default_code = "subscription_not_found"


class WorkerNotFound(NotFound):
    """No worker with this id was seen lately in the queues this key may see."""

    default_code = "worker_not_found"


class MethodNotAllowed(JobqError):
    """This path does not take this method (the answer's Allow header lists those it does)."""

    default_status = 405
    default_code = "method_not_allowed"


class Conflict(JobqError):
    """The request conflicts with the resource's current state."""

    default_status = 409
    default_code = "conflict"


class LeaseLost(Conflict):
    """This lease no longer holds the job: drop it, someone else has it or it is settled."""

    default_code = "lease_lost"

    @property
    def job_id(self) -> int | None:
        value = self.problem.get("job_id")
        return value if isinstance(value, int) else None

    @property
    def state(self) -> str | None:
        value = self.problem.get("state")
        return value if isinstance(value, str) else None


class SnoozeLimitReached(Conflict):
    """The job snoozed as many times as the service allows: complete or fail it."""

    default_code = "snooze_limit_reached"


class ExecutionTimeout(LeaseLost):
    """The attempt ran past the job's `timeout_seconds`: the service fails it as `timeout`."""

    default_code = "execution_timeout"


class KeyExists(Conflict):
    """An API key with this name already exists (revoked keys keep their names)."""

    default_code = "key_exists"


class JobFinished(Conflict):
    """The job already finished: there is nothing left to cancel."""

    default_code = "job_finished"


class JobNotRetryable(Conflict):
    """Only a failed or cancelled job can be retried."""

    default_code = "job_not_retryable"


class ParentEnded(JobNotRetryable):
    """A parent the job waits for failed, was cancelled or was deleted: retry that parent
    instead (its dependents follow)."""

    default_code = "parent_ended"


class UniqueHeld(JobNotRetryable):
    """Another job holds this job's uniqueness (its `unique` key, in its period and
    states): retry this one once that one has finished."""

    default_code = "unique_held"


class JobRunning(Conflict):
    """The job is running: cancel it first, then delete it once it has stopped."""

    default_code = "job_running"


class Gone(JobqError):
    """What was asked for is no longer kept."""

    default_status = 410
    default_code = "gone"


class EventsExpired(Gone):
    """The events after this position are no longer kept."""

    default_code = "events_expired"


class PayloadTooLarge(JobqError):
    """The request, payload or result is larger than the service accepts."""

    default_status = 413
    default_code = "payload_too_large"


class UnsupportedMediaType(JobqError):
    """The body was not sent as JSON."""

    default_status = 415
    default_code = "unsupported_media_type"


class ValidationError(JobqError):
    """Fields are missing, unknown or out of bounds."""

    default_status = 422
    default_code = "validation_error"

    @property
    def errors(self) -> list[dict[str, Any]]:
        value = self.problem.get("errors")
        return value if isinstance(value, list) else []


class ConfirmationMismatch(ValidationError):
    """The confirmation does not name the queue the action is for."""

    default_code = "confirmation_mismatch"


class TargetNotAllowed(ValidationError):
    """The URL is not a target the service may deliver to (its allowlist refuses it)."""

    default_code = "target_not_allowed"


class TooManyRequests(JobqError):
    """Too much at once: retry after the answer's Retry-After."""

    default_status = 429
    default_code = "too_many_requests"

    @property
    def retry_after(self) -> float | None:
        """The seconds the answer asked to wait, if it said."""
        value = self.problem.get("retry_after_seconds")
        return float(value) if isinstance(value, int | float) else None


class QueueFull(TooManyRequests):
    """The queue holds as many jobs as it may: enqueue later."""

    default_code = "queue_full"


class InternalError(JobqError):
    """The service failed unexpectedly (a bug: it logged the details)."""

    default_status = 500
    default_code = "internal_error"


class Unavailable(JobqError):
    """The service cannot do its work right now; retry shortly."""

    default_status = 503
    default_code = "unavailable"
    retryable = True


class DatabaseUnavailable(Unavailable):
    """The service cannot reach its database right now; retry shortly."""

    default_code = "database_unavailable"


class ReaperStalled(Unavailable):
    """The service's reaper has not finished a pass for several intervals."""

    default_code = "reaper_stalled"


def _subclasses(cls: type[JobqError]) -> list[type[JobqError]]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


# Every problem code the service sends, and the class raised for it.
PROBLEM_CLASSES: dict[str, type[JobqError]] = {
    cls.default_code: cls for cls in _subclasses(JobqError) if cls is not ConnectionFailed
}
_BY_STATUS: dict[int, type[JobqError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    422: ValidationError,
    405: MethodNotAllowed,
    429: TooManyRequests,
    500: InternalError,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


def error_class(status: int, code: str | None) -> type[JobqError]:
    """The class for a problem: by its `code`, else by its status, else `JobqError`."""
    if code is not None and code in PROBLEM_CLASSES:
        return PROBLEM_CLASSES[code]
    return _BY_STATUS.get(status, JobqError)


def error_from_response(response: httpx.Response) -> JobqError:
    """The typed error for an error answer (problem+json or not)."""
    problem: dict[str, Any] = {}
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        problem = body
    code = problem.get("code") if isinstance(problem.get("code"), str) else None
    detail = problem.get("detail") if isinstance(problem.get("detail"), str) else None
    cls = error_class(response.status_code, code)
    return cls(
        detail or response.reason_phrase or f"HTTP {response.status_code}",
        status=response.status_code,
        code=code,
        problem=problem,
    )
