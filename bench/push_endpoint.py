"""The push scenario's endpoint: a raw ASGI app that answers every POST with 200 and a
small JSON body at once, without reading the JSON or checking the signature.

It notes when each request arrived (wall clock, `time.time()`) under its `webhook-id`,
which the scenario reads back to time enqueue to delivery, and to time the deliveries
from the first to the last:

    POST /hook    200 {"ok":true}; the arrival noted
    GET  /stamps  {"stamps": {webhook-id: arrival}, "sample": {"body", "headers"}},
                  then forgets them

Run: `uvicorn bench.push_endpoint:app` (one process).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

ANSWER = b'{"ok":true}'
ANSWER_HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"11")]
SAMPLED_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature", "content-type")

_stamps: dict[str, float] = {}
_sample: dict[str, Any] = {}


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _answer(send: Send, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":  # lifespan: nothing to set up
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
            await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["method"] == "POST":
        arrived = time.time()
        body = await _body(receive)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        _stamps[headers.get("webhook-id", "")] = arrived
        if not _sample:
            _sample.update(
                body=body.decode(), headers={k: headers.get(k, "") for k in SAMPLED_HEADERS}
            )
        await _answer(send, ANSWER, ANSWER_HEADERS)
        return
    if scope["path"] == "/readyz":
        await _answer(send, ANSWER, ANSWER_HEADERS)
        return
    document = json.dumps({"stamps": _stamps, "sample": _sample}).encode()
    _stamps.clear()
    await _answer(
        send,
        document,
        [(b"content-type", b"application/json"), (b"content-length", str(len(document)).encode())],
    )
