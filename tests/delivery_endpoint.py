"""A real HTTP endpoint on loopback for the delivery tests: each path answers in its own
way (`/ok`, `/accepted`, `/busy`, `/error`, `/hang`, `/close`, `/redirect`, `/verify`),
and every request it got is kept (`requests`), headers and body, for the test to read.

Plain asyncio streams, HTTP/1.1 with keep-alive: nothing between the client and what
the test wants the endpoint to do (hang without answering, close the connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from standardwebhooks import Webhook, WebhookVerificationError


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    # the connection it came on: a handler that hangs can notice the client leave
    reader: asyncio.StreamReader | None = field(default=None, repr=False, compare=False)

    def json(self) -> dict[str, object]:
        value = json.loads(self.body)
        assert isinstance(value, dict)
        return value


Answer = tuple[int, dict[str, str], bytes] | None  # None: close without answering
Respond = Callable[[Received], Awaitable[Answer]]


async def exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    respond: Respond,
    closing: asyncio.Event,
) -> None:
    """One connection's HTTP/1.1 requests (keep-alive), each answered by `respond`, until
    the client closes it, an answer is None, or `closing` is set."""
    try:
        while not closing.is_set():
            line = await reader.readline()
            if not line:
                return
            _method, path, _version = line.decode().split(" ", 2)
            headers: dict[str, str] = {}
            while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = header.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            answer = await respond(Received(path, headers, body, reader))
            if answer is None:
                return
            status, extra, content = answer
            head = [f"HTTP/1.1 {status} X", f"content-length: {len(content)}"]
            head += [f"{k}: {v}" for k, v in extra.items()]
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + content)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        return
    finally:
        writer.close()


@dataclass
class Endpoint:
    """The endpoint's behaviour per path, and what it received."""

    secrets: list[str] = field(default_factory=list)  # what /verify accepts
    retry_after: str = "1"
    hang_seconds: float = 30.0
    requests: list[Received] = field(default_factory=list)
    port: int = 0
    extra: dict[str, Callable[[Received], Answer]] = field(default_factory=dict)
    _handlers: dict[asyncio.Task[None], asyncio.StreamWriter] = field(default_factory=dict)
    _closing: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def received(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]

    async def answer(self, got: Received) -> Answer:
        if got.path in self.extra:
            return self.extra[got.path](got)
        if got.path == "/ok":
            return 200, {"content-type": "application/json"}, b'{"echo": true}'
        if got.path == "/accepted":
            return 202, {}, b""
        if got.path == "/busy":
            return 429, {"retry-after": self.retry_after}, b"slow down"
        if got.path == "/unavailable":
            return 503, {"retry-after": self.retry_after}, b"later"
        if got.path == "/error":
            return 500, {}, b"boom " * 400
        if got.path == "/redirect":
            return 307, {"location": f"{self.base}/ok"}, b""
        if got.path == "/hang":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), self.hang_seconds)
            return 200, {}, b"{}"
        if got.path == "/close":
            return None
        if got.path == "/verify":
            for secret in self.secrets:
                with contextlib.suppress(WebhookVerificationError):
                    Webhook(secret).verify(got.body, got.headers)
                    return 200, {"content-type": "application/json"}, b'{"verified": true}'
            return 401, {}, b"bad signature"
        return 404, {}, b"no such path"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers[task] = writer
        try:
            await exchange(reader, writer, self._respond, self._closing)
        finally:
            self._handlers.pop(task, None)

    async def _respond(self, got: Received) -> Answer:
        self.requests.append(got)
        return await self.answer(got)


E = TypeVar("E", bound=Endpoint)


@contextlib.asynccontextmanager
async def serving(endpoint: E) -> AsyncIterator[E]:
    """`endpoint` listening on a free loopback port for the block."""
    server = await asyncio.start_server(endpoint._serve, "127.0.0.1", 0)
    endpoint.port = server.sockets[0].getsockname()[1]
    try:
        yield endpoint
    finally:
        server.close()
        endpoint._closing.set()  # a hanging answer ends, and each connection closes
        for writer in list(endpoint._handlers.values()):
            writer.close()
        await asyncio.gather(*endpoint._handlers, return_exceptions=True)
        await server.wait_closed()
