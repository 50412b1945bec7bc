"""The live event stream (`GET /v1/events`, Server-Sent Events) as an iterator.

    with Client() as jobq:
        for event in jobq.events(queues=["emails"], kinds=["failed"]):
            print(event.id, event.kind, event.job_id)

The iterator reconnects by itself when the connection drops (a replica restarting, a
proxy's timeout), resuming after the last event it received with `Last-Event-ID`: no
event is missed nor repeated while the service still keeps it (its retention, an hour
by default). It raises `EventsExpired` when it fell further behind than that, and the
error of any other refusal (`Forbidden`, `Unauthorized`, …).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobq_client._errors import JobqError, error_class

EVENTS_PATH = "/v1/events"
READ_TIMEOUT_SECONDS = 60.0  # an idle stream sends a comment every 15 s by default
RECONNECT_MIN_SECONDS = 0.25
RECONNECT_MAX_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Event:
    """A job's state change, or a queue's change (`job_id`, `type`, `attempt` None)."""

    id: int  # its position: events are numbered in commit order, without gaps
    kind: str  # enqueued, started, succeeded, failed, retrying, cancelled, queue_*
    at: datetime
    queue: str
    job_id: int | None
    type: str | None
    attempt: int | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        return cls(
            id=int(data["id"]),
            kind=str(data["kind"]),
            at=datetime.fromisoformat(data["at"]),
            queue=str(data["queue"]),
            job_id=data.get("job_id"),
            type=data.get("type"),
            attempt=data.get("attempt"),
        )


@dataclass(frozen=True, slots=True)
class Frame:
    """One dispatched Server-Sent Events frame."""

    id: str | None
    event: str | None
    data: str | None


class FrameReader:
    """Turns the stream's lines into frames, as a browser's EventSource does."""

    def __init__(self) -> None:
        self._fields: dict[str, list[str]] = {}

    def feed(self, line: str) -> Frame | None:
        """The frame this line ends (a blank line), if any."""
        if line:
            name, _, value = line.partition(":")
            if name:  # a line starting with `:` is a comment
                self._fields.setdefault(name, []).append(value.removeprefix(" "))
            return None
        fields, self._fields = self._fields, {}
        if not fields:
            return None
        return Frame(
            id=fields["id"][-1] if "id" in fields else None,
            event=fields["event"][-1] if "event" in fields else None,
            data="\n".join(fields["data"]) if "data" in fields else None,
        )


def query(
    queues: Iterable[str] | None, types: Iterable[str] | None, kinds: Iterable[str] | None
) -> dict[str, list[str]]:
    """The stream's filters as query parameters (none: everything the key may read)."""
    params: dict[str, list[str]] = {}
    for name, values in (("queue", queues), ("type", types), ("kind", kinds)):
        if values is not None:
            params[name] = list(values)
    return params


def headers(last_event_id: int | None) -> dict[str, str]:
    found = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        found["Last-Event-ID"] = str(last_event_id)
    return found


def error_of(frame: Frame) -> JobqError:
    """The error an `error` frame carries (a problem, as an HTTP answer would)."""
    try:
        problem = json.loads(frame.data or "{}")
    except ValueError:
        problem = {}
    if not isinstance(problem, dict):
        problem = {}
    found = problem.get("status")
    status = found if isinstance(found, int) else 503
    code = problem.get("code") if isinstance(problem.get("code"), str) else None
    cls = error_class(status, code)
    detail = str(problem.get("detail") or "the event stream failed")
    return cls(detail, status=status, code=code, problem=problem)


class Follower:
    """What one stream has read: the frames it turns into events, and the position to
    resume after."""

    def __init__(self, last_event_id: int | None) -> None:
        self.last_event_id = last_event_id
        self.reader = FrameReader()

    def take(self, line: str) -> Event | None:
        """The event this line completes, if any; an `error` frame raises its error."""
        frame = self.reader.feed(line)
        if frame is None:
            return None
        if frame.event == "error":
            raise error_of(frame)
        if frame.id is not None and frame.id.isdigit():
            self.last_event_id = int(frame.id)
        if frame.data is None:
            return None
        return Event.from_json(json.loads(frame.data))


def backoff(attempt: int) -> float:
    return min(RECONNECT_MIN_SECONDS * 2.0**attempt, RECONNECT_MAX_SECONDS)
