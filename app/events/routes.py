"""The live event stream: `GET /v1/events`, Server-Sent Events of the queues the key may
read (`read` scope); and event subscriptions, `admin` only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request, Response
from fastapi.responses import StreamingResponse

from app.api.openapi import problems
from app.api.types import Name
from app.core.errors import JobqError
from app.core.names import MAX_BIGINT, MAX_NAME_LENGTH, NAME_PATTERN
from app.events import views
from app.events.schemas import (
    MAX_FILTER_VALUES,
    EventKind,
    EventOut,
    SubscriptionIn,
    SubscriptionOut,
    SubscriptionsOut,
)
from app.events.service import EventFilter, EventStreams, Expired, Heartbeat
from app.events.subscriptions import Definition, Subscriptions
from app.keys import AdminCaller, KeyedRoute, ReadCaller

router = APIRouter(route_class=KeyedRoute, prefix="/v1", tags=["events"])

LAST_EVENT_ID = r"^[0-9]{1,18}$"


class EventStream(StreamingResponse):
    """A `text/event-stream` answer, never cached nor buffered by a proxy."""

    media_type = "text/event-stream"


def _streams(request: Request) -> EventStreams:
    """The event streams' service: the `events` of the app's `Services` (`app.services`;
    not a FastAPI dependency: see `app.jobs.routes.deps`)."""
    streams: EventStreams = request.app.state.services.events
    return streams


@router.get(
    "/events",
    operation_id="followEvents",
    response_class=EventStream,
    responses={
        200: {
            "model": EventOut,
            "description": "Server-Sent Events: each has the event's position as its `id`, "
            "its kind as its `event` and the event as JSON as its `data`. Comments keep "
            "an idle stream open; a frame with only an `id` moves the position a "
            "reconnecting client resumes from past events it filtered out. A stream that "
            "cannot go on ends with an `error` event whose data is a problem.",
        },
        **problems(401, 403, 410, 422),
    },
)
async def stream_events(
    caller: ReadCaller,
    request: Request,
    queue: Annotated[
        list[Name] | None,
        Query(max_length=MAX_FILTER_VALUES, description="Only these queues' events."),
    ] = None,
    type: Annotated[  # the field's name in the events
        list[Name] | None,
        Query(max_length=MAX_FILTER_VALUES, description="Only jobs of these types."),
    ] = None,
    kind: Annotated[
        list[EventKind] | None,
        Query(max_length=MAX_FILTER_VALUES, description="Only events of these kinds."),
    ] = None,
    after: Annotated[
        int | None,
        Query(
            ge=0, le=MAX_BIGINT, description="Start after this position (as `Last-Event-ID` does)."
        ),
    ] = None,
    last_event_id: Annotated[
        str | None,
        Header(
            pattern=LAST_EVENT_ID,
            max_length=20,  # a bigint's digits
            description="Resume after this event (a browser's EventSource sends it when it "
            "reconnects); 410 `events_expired` when events after it are no longer kept.",
        ),
    ] = None,
) -> EventStream:
    """Follow job and queue events as they happen (Server-Sent Events)."""
    streams = _streams(request)
    if queue is not None:
        caller.require_queues(queue)
    wanted = EventFilter(
        allowed=caller.queues.sql() if caller.queues is not None else None,
        queues=queue,
        types=type,
        kinds=list(kind) if kind is not None else None,
    )
    resume = int(last_event_id) if last_event_id is not None else after
    position = await streams.start(resume)
    return EventStream(
        _frames(streams, position, wanted),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _frames(
    streams: EventStreams, position: int, wanted: EventFilter
) -> AsyncIterator[bytes]:
    yield views.opening()
    try:
        async for item in streams.follow(position, wanted):
            if isinstance(item, Heartbeat):
                yield views.heartbeat(item.position)
            elif isinstance(item, Expired):
                yield views.failure(item.error)
                return
            else:
                yield views.frame(item)
    except JobqError as error:  # the database went away: the client resumes elsewhere
        yield views.failure(error)


SubscriptionName = Annotated[
    str,
    Path(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH, description="The subscription's name."),
]


def _subscriptions(request: Request) -> Subscriptions:
    """The subscriptions' service: the `subscriptions` of the app's `Services`."""
    found: Subscriptions = request.app.state.services.subscriptions
    return found


@router.put(
    "/subscriptions/{name}",
    operation_id="setSubscription",
    tags=["subscriptions"],
    status_code=200,
    response_model=SubscriptionOut,
    responses={
        201: {"model": SubscriptionOut, "description": "The subscription was created."},
        **problems(400, 401, 403, 413, 422),
    },
)
async def set_subscription(
    caller: AdminCaller,
    name: SubscriptionName,
    subscription: SubscriptionIn,
    request: Request,
    response: Response,
) -> dict[str, Any]:
    """Create or replace an event subscription: it receives the events after now."""
    del caller
    found, created = await _subscriptions(request).put(
        name,
        Definition(
            url=subscription.url,
            queues=subscription.queues,
            types=subscription.types,
            kinds=list(subscription.kinds) if subscription.kinds is not None else None,
            secrets=subscription.secrets,
            paused=subscription.paused,
        ),
    )
    response.status_code = 201 if created else 200
    return views.subscription(found)


@router.get(
    "/subscriptions",
    operation_id="listSubscriptions",
    tags=["subscriptions"],
    response_model=SubscriptionsOut,
    responses=problems(401, 403),
)
async def list_subscriptions(caller: AdminCaller, request: Request) -> dict[str, Any]:
    """Every event subscription, with its delivery state."""
    del caller
    found = await _subscriptions(request).all()
    return {"subscriptions": [views.subscription(s) for s in found]}


@router.get(
    "/subscriptions/{name}",
    operation_id="getSubscription",
    tags=["subscriptions"],
    response_model=SubscriptionOut,
    responses=problems(401, 403, 404, 422),
)
async def get_subscription(
    caller: AdminCaller, name: SubscriptionName, request: Request
) -> dict[str, Any]:
    """An event subscription, with its delivery state and breaker."""
    del caller
    return views.subscription(await _subscriptions(request).get(name))


@router.delete(
    "/subscriptions/{name}",
    operation_id="deleteSubscription",
    tags=["subscriptions"],
    status_code=204,
    responses=problems(401, 403, 404, 422),
)
async def delete_subscription(
    caller: AdminCaller, name: SubscriptionName, request: Request
) -> Response:
    """Delete an event subscription."""
    del caller
    await _subscriptions(request).delete(name)
    return Response(status_code=204)


@router.post(
    "/subscriptions/{name}/reset",
    operation_id="resetSubscription",
    tags=["subscriptions"],
    response_model=SubscriptionOut,
    responses=problems(401, 403, 404, 422),
)
async def reset_subscription(
    caller: AdminCaller, name: SubscriptionName, request: Request
) -> dict[str, Any]:
    """Close a subscription's breaker: its deliveries resume at once."""
    del caller
    return views.subscription(await _subscriptions(request).reset(name))
