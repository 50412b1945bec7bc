"""The live event stream: `GET /v1/events`, Server-Sent Events of the queues the key may
read (`read` scope)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from app.api.openapi import problems
from app.api.types import Name
from app.core.errors import JobqError
from app.events import views
from app.events.schemas import MAX_FILTER_VALUES, EventKind, EventOut
from app.events.service import EventFilter, EventStreams, Expired, Heartbeat
from app.keys import KeyedRoute, ReadCaller

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
        Query(ge=0, description="Start after this position (as `Last-Event-ID` does)."),
    ] = None,
    last_event_id: Annotated[
        str | None,
        Header(
            pattern=LAST_EVENT_ID,
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
