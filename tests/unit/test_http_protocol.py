"""`OneWriteHttp`: uvicorn's httptools protocol writing each answer's head with its body.

The protocol is driven as uvicorn's server drives it (`connection_made`,
`data_received`) over a transport that records every write.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from app.api.http_protocol import OneWriteHttp

GET = b"GET /x HTTP/1.1\r\nhost: t\r\n\r\n"


class Wire(asyncio.Transport):
    """A connection that records what is written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        self.writes.append(b"".join(list_of_data))  # one system call for them all

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(
            name, default
        )

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def connect(
    app: Any, protocol: type[HttpToolsProtocol] = OneWriteHttp
) -> tuple[HttpToolsProtocol, ServerState, Wire]:
    """A connection to `app` as uvicorn's server makes one: the protocol, its server's
    state (the requests' tasks) and the wire."""
    config = uvicorn.Config(app, log_config=None, lifespan="off")
    config.load()
    state = ServerState()
    wire = Wire()
    http = protocol(config=config, server_state=state, app_state={})
    http.connection_made(wire)
    return http, state, wire


async def exchange(
    app: Any, *requests: bytes, protocol: type[HttpToolsProtocol] = OneWriteHttp
) -> Wire:
    """Send `requests` on one connection, one after another; the wire once all are answered."""
    http, state, wire = connect(app, protocol)
    for request in requests:
        http.data_received(request)
        while state.tasks:
            await asyncio.gather(*list(state.tasks))
    http.connection_lost(None)
    return wire


async def answer(scope: Scope, receive: Receive, send: Send) -> None:
    await JSONResponse({"id": 7, "queue": "emails"}, headers={"x-request-id": "r1"})(
        scope, receive, send
    )


async def test_an_answer_goes_out_in_one_write_with_uvicorns_bytes() -> None:
    ours = await exchange(answer, GET)
    theirs = await exchange(answer, GET, protocol=HttpToolsProtocol)
    assert len(theirs.writes) == 2  # uvicorn: the head, then the body
    assert ours.writes == [b"".join(theirs.writes)]
    assert ours.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert ours.writes[0].endswith(b'\r\n\r\n{"id":7,"queue":"emails"}')


async def test_each_answer_of_a_kept_alive_connection_in_one_write() -> None:
    wire = await exchange(answer, GET, GET, GET)
    assert len(wire.writes) == 3
    assert all(w.startswith(b"HTTP/1.1 200 OK\r\n") and w.endswith(b"}") for w in wire.writes)


async def test_the_head_of_an_answer_to_head_is_written_at_once() -> None:
    wire = await exchange(answer, b"HEAD /x HTTP/1.1\r\nhost: t\r\n\r\n")
    assert len(wire.writes) == 1
    assert wire.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert wire.writes[0].endswith(b"\r\n\r\n")  # no body


async def test_a_streamed_answer_starts_with_its_head_alone() -> None:
    async def chunks() -> Any:
        yield b"a"
        yield b"b"

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await StreamingResponse(chunks())(scope, receive, send)

    wire = await exchange(app, GET)
    assert wire.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert wire.writes[0].endswith(b"transfer-encoding: chunked\r\n\r\n")
    assert b"".join(wire.writes[1:]) == b"1\r\na\r\n1\r\nb\r\n0\r\n\r\n"


async def test_100_continue_is_not_held_back() -> None:
    seen: list[bytes] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        body = await Request(scope, receive).body()
        seen.append(body)
        await Response(b"ok:" + body)(scope, receive, send)

    http, state, wire = connect(app)
    http.data_received(
        b"POST /x HTTP/1.1\r\nhost: t\r\ncontent-length: 2\r\nexpect: 100-continue\r\n\r\n"
    )
    for _ in range(10):  # the app asks for the body: uvicorn says to go on
        await asyncio.sleep(0)
    assert wire.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    http.data_received(b"hi")
    await asyncio.gather(*list(state.tasks))
    assert seen == [b"hi"]
    assert len(wire.writes) == 2
    assert wire.writes[1].startswith(b"HTTP/1.1 200 OK\r\n")
    assert wire.writes[1].endswith(b"\r\n\r\nok:hi")


async def test_an_app_failing_after_its_head_gets_the_head_out_then_the_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]}
        )
        raise RuntimeError("gone")

    wire = await exchange(app, GET)
    assert wire.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"]
    assert wire.closed
    assert "Exception in ASGI application" in caplog.text
