"""The operator calls as data (queues, schedules, acting on one job), as `_calls` does for
producers and workers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx

from jobq_client._admin import (
    AuditPage,
    CatchUp,
    PushHealth,
    QueueSettings,
    QueueStats,
    Schedule,
    Stats,
    WorkerInfo,
)
from jobq_client._calls import Call, _json, _segment
from jobq_client._models import JobRecord

SCHEDULES_PAGE = 500  # the most the service hands in one page
WORKERS_PAGE = 500  # ... of workers


def _none(_response: object) -> None:
    return None


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def retry_job(job_id: int, run_at: datetime | None, reset_attempts: bool) -> Call[JobRecord]:
    body: dict[str, Any] = {"run_at": _time(run_at)} if run_at is not None else {}
    if reset_attempts:
        body["reset_attempts"] = True
    return Call(
        "POST",
        f"/v1/jobs/{int(job_id)}/retry",
        lambda r: JobRecord.from_json(_json(r)),
        body=body,
        has_body=True,
    )


def delete_job(job_id: int) -> Call[None]:
    return Call("DELETE", f"/v1/jobs/{int(job_id)}", _none)


def queue_action(queue: str, action: str, body: dict[str, Any] | None = None) -> Call[Any]:
    """pause, resume, purge or failed/retry (redrive): the answer's JSON as is."""
    return Call(
        "POST", f"/v1/queues/{_segment(queue)}/{action}", _json, body=body or {}, has_body=True
    )


def get_push_health(queue: str) -> Call[PushHealth]:
    return Call(
        "GET", f"/v1/queues/{_segment(queue)}/push", lambda r: PushHealth.from_json(_json(r))
    )


def reset_push(queue: str) -> Call[PushHealth]:
    return Call(
        "POST",
        f"/v1/queues/{_segment(queue)}/push/reset",
        lambda r: PushHealth.from_json(_json(r)),
        body={},
        has_body=True,
    )


def get_queue(queue: str) -> Call[QueueStats]:
    return Call("GET", f"/v1/queues/{_segment(queue)}", lambda r: QueueStats.from_json(_json(r)))


def list_queues() -> Call[list[QueueStats]]:
    return Call("GET", "/v1/queues", lambda r: get_stats().parse(r).queues)


def get_stats() -> Call[Stats]:
    return Call("GET", "/v1/queues", lambda r: Stats.from_json(_json(r)))


def get_queue_settings(queue: str) -> Call[QueueSettings]:
    return Call(
        "GET",
        f"/v1/queues/{_segment(queue)}/settings",
        lambda r: QueueSettings.from_json(_json(r)),
    )


def set_queue_settings(queue: str, changes: dict[str, Any]) -> Call[QueueSettings]:
    body = {k: v.to_json() if hasattr(v, "to_json") else v for k, v in changes.items()}
    return Call(
        "PUT",
        f"/v1/queues/{_segment(queue)}/settings",
        lambda r: QueueSettings.from_json(_json(r)),
        body=body,
        has_body=True,
    )


def set_schedule(
    name: str,
    *,
    queue: str,
    type: str,
    cron: str,
    payload: Any,
    timezone: str,
    priority: int,
    max_attempts: int | None,
    lease_seconds: int | None,
    metadata: dict[str, Any] | None,
    paused: bool,
    catch_up: CatchUp,
    catch_up_limit: int,
) -> Call[Schedule]:
    body: dict[str, Any] = {
        "queue": queue,
        "type": type,
        "cron": cron,
        "payload": payload,
        "timezone": timezone,
        "priority": priority,
        "paused": paused,
        "catch_up": catch_up,
        "catch_up_limit": catch_up_limit,
        "metadata": metadata or {},
    }
    if max_attempts is not None:
        body["max_attempts"] = max_attempts
    if lease_seconds is not None:
        body["lease_seconds"] = lease_seconds
    return Call(
        "PUT",
        f"/v1/schedules/{_segment(name)}",
        lambda r: Schedule.from_json(_json(r)),
        body=body,
        has_body=True,
    )


def get_schedule(name: str) -> Call[Schedule]:
    return Call("GET", f"/v1/schedules/{_segment(name)}", lambda r: Schedule.from_json(_json(r)))


def schedules_page(after: str) -> Call[tuple[list[Schedule], str | None]]:
    """One page of schedules by name after `after`, and the name to ask after next."""

    def read(response: httpx.Response) -> tuple[list[Schedule], str | None]:
        body = _json(response)
        return [Schedule.from_json(s) for s in body["schedules"]], body.get("next_after")

    return Call("GET", "/v1/schedules", read, params={"after": after, "limit": SCHEDULES_PAGE})


def delete_schedule(name: str) -> Call[None]:
    return Call("DELETE", f"/v1/schedules/{_segment(name)}", _none)


def switch_schedule(name: str, action: str) -> Call[Schedule]:
    return Call(
        "POST",
        f"/v1/schedules/{_segment(name)}/{action}",
        lambda r: Schedule.from_json(_json(r)),
        body={},
        has_body=True,
    )


def set_subscription(name: str, body: dict[str, Any]) -> Call[dict[str, Any]]:
    """Create or replace an event subscription; the answer's JSON (with `secret` once)."""
    return Call("PUT", f"/v1/subscriptions/{_segment(name)}", _json, body=body, has_body=True)


def get_subscription(name: str) -> Call[dict[str, Any]]:
    return Call("GET", f"/v1/subscriptions/{_segment(name)}", _json)


def list_subscriptions() -> Call[list[dict[str, Any]]]:
    return Call("GET", "/v1/subscriptions", lambda r: list(_json(r)["subscriptions"]))


def delete_subscription(name: str) -> Call[None]:
    return Call("DELETE", f"/v1/subscriptions/{_segment(name)}", _none)


def reset_subscription(name: str) -> Call[dict[str, Any]]:
    return Call("POST", f"/v1/subscriptions/{_segment(name)}/reset", _json, body={}, has_body=True)


def audit_page(
    *,
    key: str | None,
    action: str | None,
    queue: str | None,
    since: datetime | None,
    before: int | None,
    limit: int | None,
) -> Call[AuditPage]:
    """One page of the audit log, newest first."""
    given = {
        "key": key,
        "action": action,
        "queue": queue,
        "since": _time(since),
        "before": before,
        "limit": limit,
    }
    params: dict[str, str | int | float] = {k: v for k, v in given.items() if v is not None}
    return Call("GET", "/v1/audit", lambda r: AuditPage.from_json(_json(r)), params=params)


def workers_page(after: str | None) -> Call[tuple[list[WorkerInfo], str | None]]:
    """One page of workers by id after `after`, and the id to ask after next."""

    def read(response: httpx.Response) -> tuple[list[WorkerInfo], str | None]:
        body = _json(response)
        return [WorkerInfo.from_json(w) for w in body["workers"]], body.get("next_after")

    params: dict[str, str | int | float] = {"limit": WORKERS_PAGE}
    if after is not None:
        params["after"] = after
    return Call("GET", "/v1/workers", read, params=params)


def switch_worker(worker_id: str, action: str) -> Call[bool]:
    """Quiet or resume a worker; whether it is quiet now."""
    return Call(
        "POST",
        f"/v1/workers/{_segment(worker_id)}/{action}",
        lambda r: bool(_json(r)["quiet"]),
        body={},
        has_body=True,
    )
