"""API keys over HTTP: replicas reached from this machine and from elsewhere."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.keys import (
    Authenticator,
)
from tests.helpers import bearer

REMOTE_PEER = ("203.0.113.7", 40000)  # TEST-NET-3: not this machine


NOTIFY_WAIT_SECONDS = 2.0


@dataclass
class Service:
    """One replica: a client on this machine (`local`) and one from elsewhere (`remote`)."""

    app: FastAPI
    local: httpx.AsyncClient
    remote: httpx.AsyncClient

    @property
    def auth(self) -> Authenticator:
        auth: Authenticator = self.app.state.services.auth
        return auth

    async def listening(self) -> None:
        """Wait until its LISTEN connection is up (cached keys are trusted only then)."""
        deadline = time.monotonic() + 10
        while not self.auth.listening:
            assert time.monotonic() < deadline, "the listener never connected"
            await asyncio.sleep(0.02)


@pytest.fixture
async def service_factory(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> AsyncIterator[Callable[..., Awaitable[Service]]]:
    remotes: list[httpx.AsyncClient] = []

    async def make(**overrides: Any) -> Service:
        app = app_factory(**overrides)
        local = await client_factory(app)
        remote = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, client=REMOTE_PEER), base_url="http://jobq.test"
        )
        remotes.append(remote)
        service = Service(app, local, remote)
        await service.listening()
        return service

    yield make
    for remote in remotes:
        await remote.aclose()


async def eventually_refused(client: httpx.AsyncClient, key: str) -> float:
    """Seconds until `key` is refused with 401 (fails after NOTIFY_WAIT_SECONDS)."""
    started = time.monotonic()
    while True:
        response = await client.get("/v1/jobs", headers=bearer(key))
        elapsed = time.monotonic() - started
        if response.status_code == 401:
            return elapsed
        assert response.status_code == 200, response.text
        assert elapsed < NOTIFY_WAIT_SECONDS, "the key still works"
        await asyncio.sleep(0.01)
