"""The request middleware: request id, one log line per request, the HTTP duration metric.

A plain ASGI middleware (Starlette's `BaseHTTPMiddleware` costs a task and a stream per
request). The request id is the client's `X-Request-ID` when it is a sane token (up to
128 letters, digits and `._:-`), else a new random one; it is echoed in the response's
`X-Request-ID` and set for every log line written while the request is served.
"""

from __future__ import annotations

import logging
import random
import re
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.redact import cut_tokens
from app.core import metrics
from app.core.logging import REQUEST_ID, event

log = logging.getLogger("jobq.access")
HEADER = b"x-request-id"
_SANE_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
# Probes and scrapes arrive every few seconds: logged at DEBUG only.
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
UNMATCHED = "unmatched"  # the route label of requests no route matched (no path cardinality)


def request_id(headers: list[tuple[bytes, bytes]]) -> str:
    """The client's request id if it sent a sane one, else a fresh one."""
    for name, value in headers:
        if name == HEADER and _SANE_ID.fullmatch(value):
            return value.decode("ascii")
    # 128 random bits from the process's generator, reseeded from the system's in every
    # forked child: an id to correlate lines, not a secret (secrets.token_hex asks the
    # kernel each time)
    return f"{random.getrandbits(128):032x}"


class RequestContext:
    """ASGI middleware: request id, access log (`access_log`), `jobq_http_request_duration`."""

    def __init__(self, app: ASGIApp, *, access_log: bool = True) -> None:
        self.app = app
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id(scope["headers"])
        header = (HEADER, rid.encode("ascii"))
        status = 500  # unless a response starts: the error middleware outside answers 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        token = REQUEST_ID.set(rid)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            metrics.child(metrics.HTTP_DURATION, route, scope["method"], str(status)).observe(
                seconds
            )
            if self.access_log:
                self._log(scope, route, status, seconds, rid)
            REQUEST_ID.reset(token)

    @staticmethod
    def _log(scope: Scope, route: str, status: int, seconds: float, rid: str) -> None:
        path = cut_tokens(scope["path"])
        if status >= 500:
            level = logging.WARNING
        elif scope["path"] in QUIET_PATHS:
            level = logging.DEBUG
        else:
            level = logging.INFO
        client = scope.get("client")
        event(
            log,
            "request",
            "%s %s %d %.1fms request_id=%s",
            scope["method"],
            path,
            status,
            seconds * 1000,
            rid,
            level=level,
            method=scope["method"],
            path=path,
            route=route,
            status=status,
            duration_ms=round(seconds * 1000, 3),
            client=client[0] if client else None,
        )
