"""The Python SDK's public surface: the names it exports, an error class for every problem
code the service sends (and no other), and the models it parses answers into."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

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
            "TargetNotAllowed", "PushTarget", "PushTargetInfo", "Delivery", "InvalidDelivery",
            "PushBreaker", "PushHealth",
            "verify_delivery",
            "Dependencies", "ErrorInfo", "ExecutionTimeout", "Parent", "ParentEnded",
            "QueueSettings", "QueueStats", "RateLimit", "Stats", "Aging", "Explanation", "Reason",
            "Ref", "Related", "Retry", "Schedule", "ScheduleRun", "Snooze", "SnoozeLimitReached",
            "Unique", "UniqueHeld", "Uniqueness",
            "Event", "EventsExpired", "Gone", "SubscriptionNotFound", "AuditEntry", "AuditPage",
            "TraceContext",
            "WorkerInfo", "WorkerNotFound",
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


def _client(answer: httpx.Response, **options: Any) -> jobq_client.Client:
    transport = httpx.MockTransport(lambda request: answer)
    retry = jobq_client.RetryPolicy(max_retries=0)
    return jobq_client.Client("http://jobq.test", transport=transport, retry=retry, **options)


def test_on_answer_sees_each_answers_json_as_sent() -> None:
    seen: list[Any] = []
    sent = {"queue": "q", "max_backlog": 10, "rate_limit": None, "added_later": [1]}
    with _client(httpx.Response(200, json=sent), on_answer=seen.append) as client:
        settings = client.get_queue_settings("q")
    assert settings.max_backlog == 10 and seen == [sent]
    with _client(httpx.Response(204), on_answer=seen.append) as client:
        client.delete_job(1)
    assert seen == [sent]  # no body, nothing to see
    refused = httpx.Response(404, json={"title": "Not found"})
    with _client(refused, on_answer=seen.append) as c, pytest.raises(jobq_client.NotFound):
        c.delete_job(1)
    assert seen == [sent]  # errors are raised, not seen


def test_an_answer_that_is_not_jobqs_raises_jobq_error() -> None:
    for answer in (httpx.Response(200, text="<html>"), httpx.Response(200, json=[1])):
        with _client(answer) as client, pytest.raises(jobq_client.JobqError) as raised:
            client.get_stats()
        assert raised.value.detail == (
            "the answer from http://jobq.test/v1/queues is not jobq's (is http://jobq.test jobq?)"
        )
