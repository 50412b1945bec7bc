"""Refuse request bodies over the limit before they are read into memory."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import problem


class BodySizeLimit:
    """ASGI middleware: 413 `payload_too_large` for bodies over `max_bytes`.

    A declared `Content-Length` over the limit is refused at once; a chunked body is
    read only until it passes the limit.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        if declared is not None:
            await self.app(scope, receive, send)  # the server enforces the declared length
            return
        chunks: list[Message] = []
        size = 0
        while True:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(
            413,
            "payload_too_large",
            f"the request body is over the {self.max_bytes}-byte limit",
            title="Payload too large",
            limit_bytes=self.max_bytes,
        )
        response.headers["connection"] = "close"
        await response(scope, receive, send)
