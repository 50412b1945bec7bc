"""A Python client and worker SDK for jobq, the PostgreSQL-backed job queue over HTTP.

from jobq_client import Client, Job, Worker

with Client("http://127.0.0.1:8000") as jobq:
    jobq.enqueue("images", "resize", {"path": "cat.png", "width": 640})

worker = Worker(queues=["images"], concurrency=4)

@worker.handler("resize")
async def resize(job: Job) -> dict[str, str]:
    await job.progress(50, stage="resize")
    return {"path": job.payload["path"]}

worker.run()
"""

from jobq_client._admin import (
    Aging,
    PushTarget,
    PushTargetInfo,
    QueueSettings,
    QueueStats,
    RateLimit,
    Schedule,
    ScheduleRun,
    Stats,
)
from jobq_client._client import AsyncClient, Client, RetryPolicy
from jobq_client._errors import (
    BadRequest,
    ConfirmationMismatch,
    Conflict,
    ConnectionFailed,
    DatabaseUnavailable,
    Forbidden,
    InternalError,
    InvalidJson,
    JobFinished,
    JobNotFound,
    JobNotRetryable,
    JobqError,
    JobRunning,
    KeyExists,
    KeyNotFound,
    LeaseForbidden,
    LeaseLost,
    LeaseNotFound,
    MethodNotAllowed,
    NotFound,
    ParentEnded,
    PayloadTooLarge,
    QueueFull,
    ReaperStalled,
    ScheduleNotFound,
    TargetNotAllowed,
    TooManyRequests,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
    ValidationError,
)
from jobq_client._job import Job, JobCancelled, Permanent, Retry
from jobq_client._models import (
    Ack,
    AckResult,
    Attempt,
    BatchItem,
    Complete,
    Dependencies,
    Enqueued,
    ErrorInfo,
    Fail,
    Heartbeat,
    JobRecord,
    JobsPage,
    JobSpec,
    JobState,
    Lease,
    Parent,
    Progress,
    Ref,
    Related,
)
from jobq_client._push import Delivery, InvalidDelivery, verify_delivery
from jobq_client._worker import Worker

__version__ = "0.1.0"

__all__ = [
    "Ack",
    "AckResult",
    "Aging",
    "AsyncClient",
    "Attempt",
    "BadRequest",
    "BatchItem",
    "Client",
    "Complete",
    "ConfirmationMismatch",
    "Conflict",
    "ConnectionFailed",
    "DatabaseUnavailable",
    "Delivery",
    "Dependencies",
    "Enqueued",
    "ErrorInfo",
    "Fail",
    "Forbidden",
    "Heartbeat",
    "InternalError",
    "InvalidDelivery",
    "InvalidJson",
    "Job",
    "JobCancelled",
    "JobFinished",
    "JobNotFound",
    "JobNotRetryable",
    "JobRecord",
    "JobRunning",
    "JobSpec",
    "JobState",
    "JobqError",
    "JobsPage",
    "KeyExists",
    "KeyNotFound",
    "Lease",
    "LeaseForbidden",
    "LeaseLost",
    "LeaseNotFound",
    "MethodNotAllowed",
    "NotFound",
    "Parent",
    "ParentEnded",
    "PayloadTooLarge",
    "Permanent",
    "Progress",
    "PushTarget",
    "PushTargetInfo",
    "QueueFull",
    "QueueSettings",
    "QueueStats",
    "RateLimit",
    "ReaperStalled",
    "Ref",
    "Related",
    "Retry",
    "RetryPolicy",
    "Schedule",
    "ScheduleNotFound",
    "ScheduleRun",
    "Stats",
    "TargetNotAllowed",
    "TooManyRequests",
    "Unauthorized",
    "Unavailable",
    "UnsupportedMediaType",
    "ValidationError",
    "Worker",
    "__version__",
    "verify_delivery",
]
