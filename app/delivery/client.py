"""Sending one delivery: an httpx transport made for it (`create_transport`) and `send`,
which POSTs a signed JSON body to a target's URL and reports what came back as an
`Attempt`.

The transport is httpx's over aiohttp's connection pool (`httpx_aiohttp.AiohttpTransport`,
httpx's transport extension point): httpx's own pool spent most of a delivery's time
with many connections open (docs/performance/push.md). `send` hands each request to the
transport itself, not through an `httpx.AsyncClient`: a delivery wants nothing a client
adds (redirects, cookies, auth, default headers), so it follows no redirect (a 3xx is
the answer) and keeps no cookie (an endpoint's would reach every target on its
address); the transport reads no proxy or certificate setting from the environment,
and connects only to the address the allowlist checked (`Allowlist.resolve`): the
URL's host is replaced by that address, the `Host` header and TLS's server name
(httpx's `sni_hostname` extension) keep the name, so a name that resolves elsewhere
between the check and the connection (DNS rebinding) reaches nothing.

    transport = create_transport(max_connections=64)
    attempt = await send(transport, allowlist, target_url, body, headers, timeout_seconds=10)
    attempt.status      # the HTTP status, None when no answer came
    attempt.failure     # None, or "timeout", "connection", "refused" (not allowed)
    attempt.body        # the answer's first `max_body_bytes` bytes
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from app import __version__
from app.core.errors import TargetNotAllowed
from app.delivery.allowlist import Allowlist

# What of an answer's body is read: a result to store (2xx), or an excerpt of an error.
DEFAULT_MAX_BODY_BYTES = 256 * 1024
MAX_EXCERPT_CHARS = 512
MAX_RETRY_AFTER_SECONDS = 24 * 3600
USER_AGENT = f"jobq/{__version__}"  # what an endpoint's logs see (a target's headers win)

Failure = Literal["timeout", "connection", "refused", "too_large"]


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one delivery attempt got back."""

    status: int | None  # None: no answer (see `failure`)
    body: bytes
    headers: Mapping[str, str]
    seconds: float  # from the request's start to the answer's end
    failure: Failure | None = None
    detail: str = ""  # for a failure without an answer, what happened

    @property
    def ok(self) -> bool:
        """A 2xx answer, read whole."""
        return self.failure is None and self.status is not None and 200 <= self.status < 300

    @property
    def status_class(self) -> str:
        """`2xx` … `5xx`, or the failure (`timeout`, `connection`, `refused`)."""
        if self.failure is not None or self.status is None:
            return self.failure or "connection"
        return f"{self.status // 100}xx"

    def excerpt(self, limit: int = MAX_EXCERPT_CHARS) -> str:
        """The start of the answer's body as text (or what failed), at most `limit` chars."""
        text = self.body.decode("utf-8", "replace") if self.body else self.detail
        return text[:limit]

    def retry_after(self) -> float | None:
        """Seconds the answer's `Retry-After` asks to wait (a number or an HTTP date),
        bounded; None without a usable one."""
        return retry_after(self.headers.get("retry-after"))


def retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """A `Retry-After` header's wait in seconds, within 0 and a day; None if unusable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return min(max(seconds, 0.0), float(MAX_RETRY_AFTER_SECONDS))


def create_transport(*, max_connections: int) -> httpx.AsyncBaseTransport:
    """The transport deliveries are sent through: nothing from the environment, at most
    `max_connections` open (the dispatcher's concurrency). Close it with `aclose()`."""
    return AiohttpTransport(client=functools.partial(_session, max_connections))


@functools.lru_cache(maxsize=1024)
def _pinned(url: str, address: str) -> tuple[httpx.URL, str]:
    """`url` with its host replaced by `address`, and the `Host` header that names it."""
    target = httpx.URL(url)
    return target.copy_with(host=address), target.netloc.decode("ascii")


def _session(max_connections: int) -> aiohttp.ClientSession:
    """The transport's aiohttp session (made in the loop, at the first request)."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(
            limit=max_connections, ssl=httpx.create_ssl_context(trust_env=False)
        ),
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
    )


async def send(
    transport: httpx.AsyncBaseTransport,
    allowlist: Allowlist,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout_seconds: float,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Attempt:
    """POST `body` (JSON) with `headers` to `url`, the whole attempt within
    `timeout_seconds`; never raises for what the target or the network does."""
    started = time.perf_counter()

    def failed(failure: Failure, detail: str) -> Attempt:
        return Attempt(None, b"", {}, time.perf_counter() - started, failure, detail)

    try:
        async with asyncio.timeout(timeout_seconds):
            permit, address = await allowlist.resolve(url)
            pinned, host = _pinned(url, str(address))
            sent = {
                "content-type": "application/json",
                "user-agent": USER_AGENT,
                **headers,
                "host": host,
            }
            # no timeout of the transport's: the whole attempt's, above, is the only one
            # (the transport reports a closed connection as httpx's ConnectTimeout)
            extensions = {"sni_hostname": permit.host} if permit.scheme == "https" else {}
            request = httpx.Request(
                "POST", pinned, content=body, headers=sent, extensions=extensions
            )
            response = await transport.handle_async_request(request)
            try:
                read = bytearray()
                async for chunk in response.aiter_bytes():
                    read += chunk
                    if len(read) > max_body_bytes:
                        return Attempt(
                            response.status_code,
                            bytes(read[:max_body_bytes]),
                            dict(response.headers),
                            time.perf_counter() - started,
                            "too_large",
                            f"the answer is larger than {max_body_bytes} bytes",
                        )
            finally:
                await response.aclose()
    except TargetNotAllowed as exc:
        return failed("refused", exc.detail)
    except TimeoutError:
        return failed("timeout", f"no answer within {timeout_seconds:g} s")
    except (httpx.HTTPError, aiohttp.ClientError) as exc:  # the latter: not mapped to httpx's
        return failed("connection", f"{type(exc).__name__}: {exc}"[:MAX_EXCERPT_CHARS])
    return Attempt(
        response.status_code, bytes(read), dict(response.headers), time.perf_counter() - started
    )
