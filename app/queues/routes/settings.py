"""Operators: a queue's settings (backlog, limits, retry and retention policy, and
whether it is pushed: its push target)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from app.api.openapi import problems
from app.api.params import QueuePath
from app.keys import AdminCaller, KeyedRoute, ReadCaller
from app.push import TargetChange
from app.queues import views
from app.queues.routes.deps import services
from app.queues.schemas import QueueSettingsIn, QueueSettingsOut
from app.queues.service import SettingsChange

router = APIRouter(route_class=KeyedRoute, prefix="/v1", tags=["queues"])

# the settings of two columns each: the columns, and the fields of the setting for them
_PAIRS = {
    "rate_limit": ("rate_limit_jobs", "jobs", "rate_limit_seconds", "per_seconds"),
    "rate_limit_per_key": (
        "rate_limit_per_key_jobs", "jobs", "rate_limit_per_key_seconds", "per_seconds"
    ),
    "aging": ("aging_seconds", "per_seconds", "aging_max", "max_boost"),
}  # fmt: skip
# the row's columns that `QueueSettingsIn` names alike (`push` is a table of its own)
_PLAIN = [name for name in QueueSettingsIn.model_fields if name not in {*_PAIRS, "push"}]


def _change(sent: QueueSettingsIn) -> SettingsChange:
    """The settings sent, as the columns they change."""
    values: dict[str, Any] = {
        name: getattr(sent, name) for name in _PLAIN if name in sent.model_fields_set
    }
    for name, (first, first_field, second, second_field) in _PAIRS.items():
        if name in sent.model_fields_set:
            pair = getattr(sent, name)
            values[first] = getattr(pair, first_field) if pair is not None else None
            values[second] = getattr(pair, second_field) if pair is not None else None
    return values


@router.get(
    "/queues/{queue}/settings",
    operation_id="getQueueSettings",
    response_model=QueueSettingsOut,
    responses=problems(401, 403, 422),
)
async def get_queue_settings(
    caller: ReadCaller, queue: QueuePath, request: Request
) -> dict[str, Any]:
    """Get a queue's settings; a queue nobody configured has the defaults."""
    queues = services(request)
    caller.require_queues([queue])
    return views.settings(await queues.settings.get(queue), await queues.push.get(queue))


@router.put(
    "/queues/{queue}/settings",
    operation_id="setQueueSettings",
    response_model=QueueSettingsOut,
    responses=problems(400, 401, 403, 413, 422),
)
async def set_queue_settings(
    _caller: AdminCaller, queue: QueuePath, change: QueueSettingsIn, request: Request
) -> dict[str, Any]:
    """Change the settings sent (`null` clears one); the others stay. Limits apply to the
    next lease, defaults to the next enqueue or retry, on every replica."""
    queues = services(request)
    sent = change.push
    target = (
        None
        if sent is None
        else TargetChange(
            url=sent.url,
            secrets=sent.secrets,
            headers=sent.headers,
            timeout_seconds=sent.timeout_seconds,
        )
    )
    if target is not None:  # checked first: a refused target changes nothing
        await queues.push.check(queue, target)
    # The limits before the target: no replica delivers a newly pushed queue before
    # the `max_running` or rate limit sent with its target holds.
    columns = _change(change)
    current = await (
        queues.settings.change(queue, columns) if columns else queues.settings.get(queue)
    )
    if "push" in change.model_fields_set:
        if target is None:
            await queues.push.clear(queue)
        else:
            await queues.push.set(queue, target)
    return views.settings(current, await queues.push.get(queue))
