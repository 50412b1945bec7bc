"""Small helpers shared by the tests that talk to jobq: HTTP calls, problems, API keys."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import uvicorn
from fastapi import FastAPI

from app.db.database import Database
from app.db.engine import create_engine
from app.keys import Keys, KeysRepository


def free_port() -> int:
    """A TCP port nobody listens on now, on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` (or a child of it: `--workers`) listens on `port`.

    A port from `free_port()` can be taken by another process (CI runs both database
    modes at once) before the service binds it, which it does only once started; then a
    start loop that only asks the port would talk to the other process's server."""
    try:
        root = psutil.Process(pid)
        pids = {pid, *(child.pid for child in root.children(recursive=True))}
    except psutil.NoSuchProcess:
        return False
    return any(
        conn.pid in pids and conn.status == psutil.CONN_LISTEN and conn.laddr[1:2] == (port,)
        for conn in psutil.net_connections(kind="tcp")
    )


def answers(http: httpx.Client, url: str, pid: int, port: int) -> bool:
    """Whether process `pid` answers GET `url` with 200 (and not another process that
    took its port meanwhile: `listens`); a refused or dropped connection is a no."""
    try:
        return http.get(url).status_code == 200 and listens(pid, port)
    except httpx.TransportError:
        return False


@contextlib.contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """Hold `directory` alone among the test runs on this machine (CI runs both database
    modes at once): for the tests that build into the repository (npm, the SDK's wheel,
    mypy's cache). The lock file lives in the temporary directory, not the repository."""
    digest = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"jobq-tests-{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


async def enqueue(client: httpx.AsyncClient, queue: str = "default", **job: Any) -> dict[str, Any]:
    """Enqueue one job (type `task` unless given) and return it."""
    response = await client.post(f"/v1/queues/{queue}/jobs", json={"type": "task", **job})
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body


async def lease(
    client: httpx.AsyncClient, *queues: str, max_jobs: int = 1, worker: str = "w1", **extra: Any
) -> list[dict[str, Any]]:
    """Lease from the given queues (default: `default`) and return the leases."""
    response = await client.post(
        "/v1/leases",
        json={
            "queues": list(queues or ["default"]),
            "max_jobs": max_jobs,
            "worker_id": worker,
            **extra,
        },
    )
    assert response.status_code == 200, response.text
    leases: list[dict[str, Any]] = response.json()["leases"]
    return leases


async def lease_one(client: httpx.AsyncClient, *queues: str, **extra: Any) -> dict[str, Any]:
    """Lease exactly one job."""
    (only,) = await lease(client, *queues, **extra)
    return only


def assert_problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The response is a problem+json with this status and code; returns its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["code"] == code
    assert body["type"].endswith(code)
    assert body["title"] and body["detail"]
    return body


def bearer(key: str | None) -> dict[str, str]:
    return {} if key is None else {"Authorization": f"Bearer {key}"}


async def create_key(
    database_url: str, name: str, scopes: list[str], queues: list[str] | None = None
) -> str:
    """A key made as `jobq keys create` makes it: straight in the database."""
    engine = create_engine(database_url, 1)
    try:
        key, _ = await Keys(KeysRepository(Database(engine))).create(name, scopes, queues)
        return key
    finally:
        await engine.dispose()


async def revoke_key(database_url: str, name: str) -> None:
    """As `jobq keys revoke` does it."""
    engine = create_engine(database_url, 1)
    try:
        await Keys(KeysRepository(Database(engine))).revoke(name)
    finally:
        await engine.dispose()


async def put_settings(client: httpx.AsyncClient, queue: str, **body: Any) -> dict[str, Any]:
    """Change a queue's settings (200 expected); its settings as they now are."""
    response = await client.put(f"/v1/queues/{queue}/settings", json=body)
    assert response.status_code == 200, response.text
    settings: dict[str, Any] = response.json()
    return settings


async def enqueue_batches(
    client: httpx.AsyncClient, queue: str, jobs: list[dict[str, Any]], size: int = 500
) -> None:
    """Enqueue `jobs` in batches of `size`."""
    for start in range(0, len(jobs), size):
        response = await client.post(
            f"/v1/queues/{queue}/jobs/batch", json={"jobs": jobs[start : start + size]}
        )
        assert response.status_code == 201, response.text


@contextlib.asynccontextmanager
async def served(app: FastAPI) -> AsyncIterator[str]:
    """`app` served over HTTP by uvicorn in the test's event loop; its base URL."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done(), "uvicorn did not start"
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
