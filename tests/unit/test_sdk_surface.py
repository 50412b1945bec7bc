"""The Python SDK's public surface: the names it exports, an error class for every problem
code the service sends (and no other), and the models it parses answers into."""

from __future__ import annotations

import jobq_client


def test_public_names_are_pinned() -> None:
    assert sorted(jobq_client.__all__) == sorted(
        [
            "Ack", "AckResult", "AsyncClient", "Attempt", "BadRequest", "BatchItem", "Client",
            "Complete", "Conflict", "ConnectionFailed", "DatabaseUnavailable", "Enqueued", "Fail",
            "Forbidden", "Heartbeat", "InvalidJson", "Job", "JobCancelled", "JobFinished",
            "JobNotFound", "JobNotRetryable", "JobRecord", "JobRunning", "JobSpec", "JobState",
            "JobqError", "JobsPage", "Lease", "LeaseLost", "LeaseNotFound", "NotFound",
            "PayloadTooLarge", "Permanent", "Progress", "QueueFull", "RetryPolicy",
            "Unauthorized", "Unavailable", "UnsupportedMediaType", "ValidationError", "Worker",
            "ConfirmationMismatch", "InternalError", "KeyExists", "KeyNotFound", "LeaseForbidden",
            "MethodNotAllowed", "ReaperStalled", "ScheduleNotFound", "TooManyRequests",
            "Dependencies", "ErrorInfo", "Parent", "ParentEnded", "QueueSettings", "QueueStats",
            "RateLimit",
            "Ref", "Related", "Retry", "Schedule", "ScheduleRun",
            "__version__",
        ]
    )  # fmt: skip
    for name in jobq_client.__all__:
        assert hasattr(jobq_client, name), name


def test_the_sdk_has_an_error_class_for_every_problem_code_and_no_other() -> None:
    from app.api.problems import codes
    from jobq_client._errors import PROBLEM_CLASSES

    server = codes()
    assert set(PROBLEM_CLASSES) == set(server), "the SDK's error classes drifted from the server"
    for code, cls in PROBLEM_CLASSES.items():
        assert cls.default_status == server[code], code
        assert cls.__name__ in jobq_client.__all__, cls.__name__


def test_a_replay_answered_in_brief_has_no_job() -> None:
    """jobq answers a key without `read` only the id and state of the job holding the key."""
    from jobq_client import Enqueued

    brief = Enqueued.from_json({"id": 3, "state": "succeeded", "deduplicated": True})
    assert (brief.id, brief.state, brief.deduplicated, brief.job) == (3, "succeeded", True, None)
