"""What refusals and documents tell a caller: a 403 for another queue's job or schedule
does not name that queue; the OpenAPI document says the probes take a key only
optionally (loopback peers call them without one); /docs has the dashboard's headers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
import pytest

from tests.api.auth_support import Service
from tests.helpers import assert_problem, bearer, create_key

pytestmark = pytest.mark.usefixtures("no_keys")

SECRET_QUEUE = "acquisition-target-zeta"


async def test_a_403_for_another_queues_job_or_schedule_names_no_queue(
    service_factory: Callable[..., Awaitable[Service]], database_url: str
) -> None:
    admin = bearer(await create_key(database_url, "admin", ["admin"]))
    reader = bearer(await create_key(database_url, "reader", ["read"], ["qa"]))
    service = await service_factory()
    http = service.remote
    job = await http.post(f"/v1/queues/{SECRET_QUEUE}/jobs", json={"type": "t"}, headers=admin)
    schedule = {"queue": SECRET_QUEUE, "type": "t", "cron": "@daily"}
    assert (await http.put("/v1/schedules/s", json=schedule, headers=admin)).status_code == 201
    for path in (
        f"/v1/jobs/{job.json()['id']}",
        f"/v1/jobs/{job.json()['id']}/dependencies",
        "/v1/schedules/s",
    ):
        answer = await http.get(path, headers=reader)
        assert_problem(answer, 403, "forbidden")
        assert SECRET_QUEUE not in answer.text, answer.text


async def test_the_probes_declare_their_key_optional(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    for path in ("/readyz", "/metrics"):
        security = document["paths"][path]["get"]["security"]
        assert {} in security and any(s for s in security), (path, security)
    assert document["paths"]["/v1/jobs"]["get"]["security"] == [{"apiKey": []}]
    assert "security" not in document["paths"]["/healthz"]["get"]


async def test_the_docs_page_has_the_dashboards_headers(client: httpx.AsyncClient) -> None:
    docs = await client.get("/docs")
    assert docs.status_code == 200
    policy = docs.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "script-src 'self' 'sha256-" in policy and "unsafe-eval" not in policy
    assert docs.headers["x-frame-options"] == "DENY"
    assert docs.headers["x-content-type-options"] == "nosniff"
