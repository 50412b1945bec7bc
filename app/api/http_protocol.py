"""The HTTP/1.1 protocol `jobq serve` runs: uvicorn's httptools one, one write per answer.

uvicorn writes a response's status line and headers as soon as the app starts the
response, then its body when the app sends it: two system calls, two TCP segments and
two wake-ups of the client for every answer of a few hundred bytes. Here the cycle of
each request writes through `HeadWithBody`, which holds the head of a response whose
length is known back until the body's first part and writes both at once. Everything
else goes out as uvicorn writes it: `100 Continue`, streamed (chunked) answers, and the
head of an answer to `HEAD`, which has no body to wait for.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle


class OneWriteHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol, each request's cycle writing through `HeadWithBody`."""

    def on_headers_complete(self) -> None:
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not before:  # a new request (an upgrade keeps the cycle)
            self.cycle.transport = HeadWithBody(self.transport, self.cycle)


class HeadWithBody(asyncio.Transport):
    """One request's view of its connection: the first write after its response started
    (the status line and headers) waits for the next one (the body) when the response
    has a `content-length` and a body; closing writes what waits first."""

    def __init__(self, transport: asyncio.Transport, cycle: RequestResponseCycle) -> None:
        super().__init__()
        self._transport = transport
        self._cycle = cycle
        self._head: bytes | None = None
        self._held = False

    def write(self, data: Any) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.writelines((head, data))
            return
        cycle = self._cycle
        if (
            not self._held
            and cycle.response_started
            and cycle.chunked_encoding is False  # a content-length: the body comes whole
            and cycle.scope["method"] != "HEAD"
        ):
            self._held = True
            self._head = bytes(data)
            return
        self._transport.write(data)

    def flush(self) -> None:
        """Write the head that waits, if any (not to a connection that is closing)."""
        head, self._head = self._head, None
        if head is not None and not self._transport.is_closing():
            self._transport.write(head)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def abort(self) -> None:
        self._transport.abort()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)
