"""What every load generator is made of: the base classes, the HTTP client (aiohttp, one
keep-alive connection per client) and the request bodies, built before the window."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from dataclasses import dataclass
from typing import Any, ClassVar

import aiohttp

JSON = {"content-type": "application/json"}
HTTP_TIMEOUT_SECONDS = 120.0
SETUP_TIMEOUT_SECONDS = 300.0
LEASE_TOKEN = re.compile(rb'"lease_id":"([^"]+)"')
ACK_OK = b'"status":200'
EMPTY_LEASES_BEFORE_DONE = 3
CONNECT_GAP_SECONDS = 0.01


class LoadError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer, read in full."""

    method: str
    path: str
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class HttpClient:
    """One keep-alive connection to the service: POST and GET, answers read in full."""

    def __init__(self, base_url: str) -> None:
        self._session = aiohttp.ClientSession(
            base_url=base_url,
            headers=JSON,
            connector=aiohttp.TCPConnector(limit=1),
            timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_SECONDS),
        )

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._session.close()

    async def _request(self, method: str, path: str, content: bytes | None) -> Answer:
        async with self._session.request(method, path, data=content) as answer:
            return Answer(method, path, answer.status, await answer.read())

    async def get(self, path: str) -> Answer:
        return await self._request("GET", path, None)

    async def post(self, path: str, content: bytes) -> Answer:
        return await self._request("POST", path, content)


def expect(answer: Answer, status: int) -> Answer:
    if answer.status_code != status:
        raise LoadError(f"{answer.method} {answer.path}: {answer.status_code} {answer.text[:500]}")
    return answer


def lease_body(queue: str, worker_id: str, max_jobs: int, wait_seconds: float = 0) -> bytes:
    body: dict[str, Any] = {"queues": [queue], "max_jobs": max_jobs, "worker_id": worker_id}
    if wait_seconds:
        body["wait_seconds"] = wait_seconds
    return json.dumps(body).encode()


def acks_body(tokens: list[bytes]) -> bytes:
    return (
        b'{"acks":['
        + b",".join(b'{"lease_id":"' + t + b'","outcome":"complete"}' for t in tokens)
        + b"]}"
    )


def job_body(payload: Any, **fields: Any) -> dict[str, Any]:
    return {"type": "bench", "payload": payload, **fields}


class Load:
    """One generator process's share of a scenario."""

    def __init__(self, index: int, params: dict[str, Any]) -> None:
        self.index = index
        self.params = params

    async def setup(self, stack: contextlib.AsyncExitStack) -> None:
        """Everything before the measured window."""

    async def run(self) -> dict[str, Any]:
        raise NotImplementedError


class HttpLoad(Load):
    """Clients, one per concurrent loop (`params[clients_param]` of them)."""

    clients_param: ClassVar[str] = "concurrency"

    async def setup(self, stack: contextlib.AsyncExitStack) -> None:
        self.clients: list[HttpClient] = []
        for _ in range(int(self.params[self.clients_param])):
            client = await stack.enter_async_context(HttpClient(self.params["base_url"]))
            expect(await client.get("/healthz"), 200)  # its connection, open
            self.clients.append(client)
            await asyncio.sleep(CONNECT_GAP_SECONDS)

    @property
    def client(self) -> HttpClient:
        return self.clients[0]


def split(total: int, parts: int) -> list[int]:
    """`total` as `parts` near-equal shares."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]
