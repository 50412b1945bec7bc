"""Every route answers every kind of key as it declares: the matrix is generated from the
app's route table, so a route that declares no access rule, or has no example request
here, fails it."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from app.keys import (
    declared_access,
    mint,
)
from app.main import create_app
from tests.api.auth_support import Service
from tests.helpers import assert_problem, bearer, create_key, revoke_key

pytestmark = pytest.mark.usefixtures("no_keys")


ROUTES = sorted(declared_access(create_app()))


KINDS = (
    "none",
    "malformed",
    "unknown",
    "wrong_secret",
    "revoked",
    "enqueue",
    "work",
    "read",
    "admin",
    "wrong_queue",
)


REFUSED_KINDS = {"none", "malformed", "unknown", "wrong_secret", "revoked"}


FILTERED = {
    ("GET", "/v1/queues"),
    ("GET", "/v1/schedules"),
    ("GET", "/v1/workers"),
}


def expected(need: str, kind: str, route: tuple[str, str]) -> tuple[int, set[str]]:
    """(200 for any 2xx, or the status; the acceptable problem codes)."""
    if need == "public":
        return 200, set()
    if kind in REFUSED_KINDS:
        return 401, {"unauthorized"}
    if need == "probe" or kind in (need, "admin"):
        return 200, set()
    if kind == "wrong_queue" and route in FILTERED:
        return 200, set()
    if kind == "wrong_queue" and need != "admin":  # the scope is right, the queue is not
        return 403, {"forbidden", "lease_forbidden"}
    return 403, {"forbidden"}


@dataclass
class Outcome:
    status: int
    code: str | None

    @classmethod
    def of(cls, response: httpx.Response) -> Outcome:
        if response.status_code < 400:
            return cls(response.status_code, None)
        body = assert_problem(response, response.status_code, response.json()["code"])
        if response.status_code == 401:
            assert response.headers["www-authenticate"].startswith("Bearer"), response.headers
        return cls(response.status_code, body["code"])


@dataclass
class Matrix:
    service: Service
    keys: dict[str, str | None]
    numbers: itertools.count[int] = field(default_factory=itertools.count)

    async def call(self, kind: str, method: str, url: str, **kwargs: Any) -> Outcome:
        response = await self.service.remote.request(
            method, url, headers=bearer(self.keys[kind]), **kwargs
        )
        return Outcome.of(response)

    async def job(self) -> int:
        response = await self.service.remote.post(
            "/v1/queues/q/jobs", json={"type": "t"}, headers=bearer(self.keys["admin"])
        )
        assert response.status_code == 201, response.text
        job_id: int = response.json()["id"]
        return job_id

    async def lease(self, kind: str) -> str:
        """A lease token, taken with `kind`'s key if it may work, else with the admin key."""
        owner = kind if kind in ("work", "admin") else "admin"
        await self.job()
        response = await self.service.remote.post(
            "/v1/leases",
            json={"queues": ["q"], "worker_id": "w"},
            headers=bearer(self.keys[owner]),
        )
        assert response.status_code == 200, response.text
        token: str = response.json()["leases"][0]["lease_id"]
        return token


async def _acks(m: Matrix, kind: str) -> Outcome:
    """The call's status if refused, else what it answered for the one ack."""
    token = await m.lease(kind)
    response = await m.service.remote.post(
        "/v1/acks",
        json={"acks": [{"lease_id": token, "outcome": "complete"}]},
        headers=bearer(m.keys[kind]),
    )
    if response.status_code != 200:
        return Outcome.of(response)
    (result,) = response.json()["results"]
    return Outcome(result["status"], result["code"])


async def _revoke(m: Matrix, kind: str) -> Outcome:
    name = f"victim-{next(m.numbers)}"
    await m.service.auth.create(name, ["read"], None)
    return await m.call(kind, "DELETE", f"/v1/keys/{name}")


async def _get_job(m: Matrix, kind: str) -> Outcome:
    job_id = await m.job()
    return await m.call(kind, "GET", f"/v1/jobs/{job_id}")


async def _on_lease(m: Matrix, kind: str, action: str, body: dict[str, Any]) -> Outcome:
    token = await m.lease(kind)
    return await m.call(kind, "POST", f"/v1/leases/{token}/{action}", json=body)


async def _retry(m: Matrix, kind: str) -> Outcome:
    job_id = await m.job()
    cancelled = await m.service.remote.post(
        f"/v1/jobs/{job_id}/cancel", headers=bearer(m.keys["admin"])
    )
    assert cancelled.status_code == 200, cancelled.text
    return await m.call(kind, "POST", f"/v1/jobs/{job_id}/retry")


async def _on_job(m: Matrix, kind: str, method: str, action: str) -> Outcome:
    job_id = await m.job()
    return await m.call(kind, method, f"/v1/jobs/{job_id}{action}")


async def _on_schedule(m: Matrix, kind: str, method: str, action: str) -> Outcome:
    """An action on a schedule (of queue `q`) that the admin key made just before."""
    name = f"s{next(m.numbers)}"
    made = await m.service.remote.put(
        f"/v1/schedules/{name}",
        json={"queue": "q", "type": "t", "cron": "@daily"},
        headers=bearer(m.keys["admin"]),
    )
    assert made.status_code == 201, made.text
    return await m.call(kind, method, f"/v1/schedules/{name}{action}")


async def _on_pushed(m: Matrix, kind: str, method: str, action: str) -> Outcome:
    """A call on the pushed queue `pushq` (its target set by the admin key just before;
    no job of it is delivered: it has none)."""
    target = {"url": "https://hooks.example.com/jobq", "secrets": ["whsec_" + "QUJD" * 8]}
    made = await m.service.remote.put(
        "/v1/queues/pushq/settings", json={"push": target}, headers=bearer(m.keys["admin"])
    )
    assert made.status_code == 200, made.text
    return await m.call(kind, method, f"/v1/queues/pushq/push{action}")


async def _on_subscription(m: Matrix, kind: str, method: str, action: str) -> Outcome:
    """A call on a subscription the admin key made just before."""
    name = f"sub{next(m.numbers)}"
    made = await m.service.remote.put(
        f"/v1/subscriptions/{name}",
        json={"url": "https://hooks.example.com/events"},
        headers=bearer(m.keys["admin"]),
    )
    assert made.status_code in (200, 201), made.text
    return await m.call(kind, method, f"/v1/subscriptions/{name}{action}")


async def _on_worker(m: Matrix, kind: str, action: str) -> Outcome:
    """Quiet or resume a worker (of queue `q`) that pinged just before, flushed."""
    name = f"w{next(m.numbers)}"
    pinged = await m.service.remote.post(
        f"/v1/workers/{name}/presence", json={"queues": ["q"]}, headers=bearer(m.keys["admin"])
    )
    assert pinged.status_code == 200, pinged.text
    await m.service.app.state.services.presence.run_once()
    return await m.call(kind, "POST", f"/v1/workers/{name}{action}")


Example = Callable[[Matrix, str], Awaitable[Outcome]]
EXAMPLES: dict[tuple[str, str], Example] = {
    ("GET", "/healthz"): lambda m, k: m.call(k, "GET", "/healthz"),
    ("GET", "/readyz"): lambda m, k: m.call(k, "GET", "/readyz"),
    ("GET", "/openapi.json"): lambda m, k: m.call(k, "GET", "/openapi.json"),
    ("GET", "/docs"): lambda m, k: m.call(k, "GET", "/docs"),
    ("GET", "/"): lambda m, k: m.call(k, "GET", "/", follow_redirects=True),
    ("GET", "/ui/{path}"): lambda m, k: m.call(k, "GET", "/ui/app.js"),
    ("GET", "/v1/workers"): lambda m, k: m.call(k, "GET", "/v1/workers"),
    ("POST", "/v1/workers/{worker_id}/presence"): lambda m, k: m.call(
        k, "POST", "/v1/workers/w/presence", json={"queues": ["q"]}
    ),
    ("POST", "/v1/workers/{worker_id}/quiet"): lambda m, k: _on_worker(m, k, "/quiet"),
    ("POST", "/v1/workers/{worker_id}/resume"): lambda m, k: _on_worker(m, k, "/resume"),
    ("GET", "/v1/queues/{queue}/failed/groups"): lambda m, k: m.call(
        k, "GET", "/v1/queues/q/failed/groups"
    ),
    ("GET", "/v1/queues/{queue}/series"): lambda m, k: m.call(k, "GET", "/v1/queues/q/series"),
    ("GET", "/docs/oauth2-redirect"): lambda m, k: m.call(k, "GET", "/docs/oauth2-redirect"),
    ("GET", "/redoc"): lambda m, k: m.call(k, "GET", "/redoc"),
    ("POST", "/v1/queues/{queue}/jobs"): lambda m, k: m.call(
        k, "POST", "/v1/queues/q/jobs", json={"type": "t", "payload": {"n": 1}}
    ),
    ("POST", "/v1/queues/{queue}/jobs/batch"): lambda m, k: m.call(
        k, "POST", "/v1/queues/q/jobs/batch", json={"jobs": [{"type": "t"}]}
    ),
    ("GET", "/v1/jobs/{job_id}"): _get_job,
    ("GET", "/v1/jobs/{job_id}/dependencies"): lambda m, k: _on_job(m, k, "GET", "/dependencies"),
    ("GET", "/v1/jobs"): lambda m, k: m.call(k, "GET", "/v1/jobs", params={"queue": "q"}),
    ("POST", "/v1/leases"): lambda m, k: m.call(
        k, "POST", "/v1/leases", json={"queues": ["q"], "worker_id": "w"}
    ),
    ("POST", "/v1/leases/{lease_id}/heartbeat"): lambda m, k: _on_lease(m, k, "heartbeat", {}),
    ("POST", "/v1/leases/{lease_id}/complete"): lambda m, k: _on_lease(m, k, "complete", {}),
    ("POST", "/v1/leases/{lease_id}/fail"): lambda m, k: _on_lease(
        m, k, "fail", {"error": {"type": "E"}}
    ),
    ("POST", "/v1/acks"): _acks,
    ("POST", "/v1/keys"): lambda m, k: m.call(
        k, "POST", "/v1/keys", json={"name": f"new-{next(m.numbers)}", "scopes": ["read"]}
    ),
    ("GET", "/v1/keys"): lambda m, k: m.call(k, "GET", "/v1/keys"),
    ("DELETE", "/v1/keys/{name}"): _revoke,
    ("POST", "/v1/jobs/{job_id}/cancel"): lambda m, k: _on_job(m, k, "POST", "/cancel"),
    ("POST", "/v1/jobs/{job_id}/retry"): _retry,
    ("DELETE", "/v1/jobs/{job_id}"): lambda m, k: _on_job(m, k, "DELETE", ""),
    ("POST", "/v1/queues/{queue}/failed/retry"): lambda m, k: m.call(
        k, "POST", "/v1/queues/q/failed/retry", json={}
    ),
    # Other queues than `q`, which the lease examples use.
    ("POST", "/v1/queues/{queue}/pause"): lambda m, k: m.call(k, "POST", "/v1/queues/pq/pause"),
    ("POST", "/v1/queues/{queue}/resume"): lambda m, k: m.call(k, "POST", "/v1/queues/pq/resume"),
    ("GET", "/v1/queues"): lambda m, k: m.call(k, "GET", "/v1/queues"),
    ("GET", "/v1/queues/{queue}"): lambda m, k: m.call(k, "GET", "/v1/queues/q"),
    ("GET", "/metrics"): lambda m, k: m.call(k, "GET", "/metrics"),
    ("GET", "/v1/queues/{queue}/settings"): lambda m, k: m.call(k, "GET", "/v1/queues/q/settings"),
    ("PUT", "/v1/schedules/{name}"): lambda m, k: m.call(
        k, "PUT", "/v1/schedules/s", json={"queue": "q", "type": "t", "cron": "@daily"}
    ),
    ("GET", "/v1/schedules"): lambda m, k: m.call(k, "GET", "/v1/schedules"),
    ("GET", "/v1/schedules/{name}"): lambda m, k: _on_schedule(m, k, "GET", ""),
    ("DELETE", "/v1/schedules/{name}"): lambda m, k: _on_schedule(m, k, "DELETE", ""),
    ("POST", "/v1/schedules/{name}/pause"): lambda m, k: _on_schedule(m, k, "POST", "/pause"),
    ("POST", "/v1/schedules/{name}/resume"): lambda m, k: _on_schedule(m, k, "POST", "/resume"),
    ("PUT", "/v1/queues/{queue}/settings"): lambda m, k: m.call(
        k, "PUT", "/v1/queues/sq/settings", json={"max_backlog": None}
    ),
    ("POST", "/v1/queues/{queue}/purge"): lambda m, k: m.call(
        k, "POST", "/v1/queues/purged/purge", json={"confirm": "purged"}
    ),
    ("GET", "/v1/queues/{queue}/push"): lambda m, k: _on_pushed(m, k, "GET", ""),
    ("POST", "/v1/queues/{queue}/push/reset"): lambda m, k: _on_pushed(m, k, "POST", "/reset"),
    ("GET", "/v1/jobs/{job_id}/explain"): lambda m, k: _on_job(m, k, "GET", "/explain"),
    ("GET", "/v1/events"): lambda m, k: m.call(k, "GET", "/v1/events", params={"queue": "q"}),
    ("POST", "/v1/leases/{lease_id}/snooze"): lambda m, k: _on_lease(
        m, k, "snooze", {"seconds": 1}
    ),
    ("PUT", "/v1/subscriptions/{name}"): lambda m, k: m.call(
        k,
        "PUT",
        f"/v1/subscriptions/n{next(m.numbers)}",
        json={"url": "https://hooks.example.com/events"},
    ),
    ("GET", "/v1/subscriptions"): lambda m, k: m.call(k, "GET", "/v1/subscriptions"),
    ("GET", "/v1/subscriptions/{name}"): lambda m, k: _on_subscription(m, k, "GET", ""),
    ("DELETE", "/v1/subscriptions/{name}"): lambda m, k: _on_subscription(m, k, "DELETE", ""),
    ("POST", "/v1/subscriptions/{name}/reset"): lambda m, k: _on_subscription(
        m, k, "POST", "/reset"
    ),
    ("GET", "/v1/audit"): lambda m, k: m.call(k, "GET", "/v1/audit", params={"limit": 5}),
}


@pytest.fixture
async def matrix(service_factory: Callable[..., Awaitable[Service]], database_url: str) -> Matrix:
    keys: dict[str, str | None] = {"none": None, "malformed": "jobq_not-a-key"}
    keys["unknown"] = mint()[0]
    for scope in ("enqueue", "work", "read", "admin"):
        keys[scope] = await create_key(database_url, scope, [scope])
    keys["wrong_queue"] = await create_key(
        database_url, "elsewhere", ["enqueue", "work", "read"], ["elsewhere", "other.*"]
    )
    keys["revoked"] = await create_key(database_url, "gone", ["enqueue", "work", "read"])
    await revoke_key(database_url, "gone")
    admin = keys["admin"]
    assert admin is not None
    keys["wrong_secret"] = admin[: admin.rindex("_") + 1] + secrets.token_urlsafe(32)
    # an accepted event stream ends at once, with its position (over the in-process
    # transport an answer is read whole)
    return Matrix(await service_factory(event_stream_seconds=0.05), keys)


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
async def test_every_route_answers_every_kind_of_key_as_declared(
    matrix: Matrix, method: str, path: str
) -> None:
    need = declared_access(matrix.service.app)[(method, path)]
    assert need is not None, f"{method} {path} declares no access rule (see app/keys/access.py)"
    example = EXAMPLES.get((method, path))
    assert example is not None, f"add an example request for {method} {path} to EXAMPLES"
    wrong = []
    for kind in KINDS:
        outcome = await example(matrix, kind)
        status, codes = expected(need, kind, (method, path))
        ok = 200 <= outcome.status < 300 if status == 200 else outcome.status == status
        if not ok or (codes and outcome.code not in codes):
            wrong.append(f"{kind}: got {outcome.status} {outcome.code}, want {status} {codes}")
    assert wrong == [], f"{method} {path} ({need})"
