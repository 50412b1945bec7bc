"""A Server-Sent Events reader for the tests of `GET /v1/events`: frames as they come,
parsed as a browser's EventSource parses them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True, slots=True)
class Frame:
    """One dispatched frame: an event (`event`, `data`), or a frame with only an `id`
    or a comment (`data` None)."""

    id: str | None
    event: str | None
    data: Any
    comment: str | None = None


async def frames(response: httpx.Response) -> AsyncIterator[Frame]:
    """The frames of an open `text/event-stream` response, until it ends."""
    fields: dict[str, list[str]] = {}
    async for line in response.aiter_lines():
        if line == "":
            if fields:
                data = "\n".join(fields["data"]) if "data" in fields else None
                yield Frame(
                    id=fields["id"][-1] if "id" in fields else None,
                    event=fields["event"][-1] if "event" in fields else None,
                    data=json.loads(data) if data is not None else None,
                    comment="\n".join(fields[""]) if "" in fields else None,
                )
            fields = {}
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name, []).append(value.removeprefix(" "))


async def take(response: httpx.Response, count: int) -> list[Frame]:
    """The next `count` events (frames with data), skipping comments and bare ids."""
    got: list[Frame] = []
    async for frame in frames(response):
        if frame.data is not None:
            got.append(frame)
            if len(got) == count:
                break
    return got
