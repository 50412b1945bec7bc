"""Refuse a request that carries a body without a valid key before reading the body.

Every route that takes a body needs a key. `KeyGate` checks the key of every request
that carries a body first, and refuses one without a valid key before reading a byte of
it, whatever the route (its rule runs before the body is read only on a `KeyedRoute`;
FastAPI reads and parses a body before it runs a route's dependencies). The route's
access rule then reuses that verdict.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.problems import from_error
from app.core.errors import JobqError, Unauthorized
from app.keys.access import VERDICT, authenticator, bearer_token
from app.keys.audit import note_refused


def _has_body(headers: Headers) -> bool:
    length = headers.get("content-length")
    return (length is not None and length != "0") or "transfer-encoding" in headers


class KeyGate:
    """ASGI middleware: a request with a body and no valid key gets 401 before it is read."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        auth = authenticator(scope["app"]) if scope["type"] == "http" else None
        headers = Headers(scope=scope) if auth is not None else None
        if auth is None or headers is None or not _has_body(headers):
            await self.app(scope, receive, send)
            return
        try:
            scope[VERDICT] = await auth.authenticate(bearer_token(headers.get("authorization")))
        except JobqError as exc:  # Unauthorized, or DatabaseUnavailable
            response = from_error(exc)
            if isinstance(exc, Unauthorized):  # an attempt at an admin action is recorded
                await note_refused(scope, exc)
            response.headers["connection"] = "close"  # the body stays unread
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
