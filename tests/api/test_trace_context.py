"""A job's W3C trace context: stored at enqueue from the `traceparent` header or the
job's `trace` field, shown by the job's GET and handed to its worker with each lease. A
malformed header is ignored, as W3C Trace Context says a receiver does; a malformed
field is refused."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers import assert_problem, enqueue, lease, lease_one

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py

PRODUCER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
OWN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
THIRTY_THREE = ",".join(f"k{i}=v" for i in range(33))  # members: one too many


async def _job(client: httpx.AsyncClient, job_id: int) -> dict[str, object]:
    response = await client.get(f"/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


async def test_the_header_is_stored_shown_and_handed_to_the_worker(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/v1/queues/traced/jobs",
        json={"type": "t"},
        headers={"traceparent": PRODUCER, "tracestate": "vendor=abc, other=1"},
    )
    assert response.status_code == 201, response.text
    trace = {"traceparent": PRODUCER, "tracestate": "vendor=abc, other=1"}
    assert response.json()["trace"] == trace
    assert (await _job(client, response.json()["id"]))["trace"] == trace
    leased = await lease_one(client, "traced")
    assert leased["job"]["trace"] == trace


async def test_a_job_without_a_trace_context_has_none(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, "plain")
    assert job["trace"] is None
    assert (await lease_one(client, "plain"))["job"]["trace"] is None


async def test_the_jobs_own_trace_wins_over_the_header(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/queues/own/jobs",
        json={"type": "t", "trace": {"traceparent": OWN}},
        headers={"traceparent": PRODUCER, "tracestate": "vendor=abc"},
    )
    assert response.status_code == 201, response.text
    assert response.json()["trace"] == {"traceparent": OWN, "tracestate": None}


async def test_a_batch_takes_the_header_for_each_job_without_its_own(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/v1/queues/batch/jobs/batch",
        json={
            "jobs": [
                {"type": "a"},
                {"type": "b", "trace": {"traceparent": OWN, "tracestate": "k=v"}},
                {"type": "c", "depends_on": [{"ref": 0}]},
            ]
        },
        headers={"traceparent": PRODUCER},
    )
    assert response.status_code == 201, response.text
    a, b, c = [await _job(client, item["id"]) for item in response.json()["jobs"]]
    assert a["trace"] == {"traceparent": PRODUCER, "tracestate": None}
    assert b["trace"] == {"traceparent": OWN, "tracestate": "k=v"}
    assert c["trace"] == {"traceparent": PRODUCER, "tracestate": None}  # the workflow path
    leases = await lease(client, "batch", max_jobs=10)
    assert {x["job"]["trace"]["traceparent"] for x in leases} == {PRODUCER, OWN}


@pytest.mark.parametrize(
    "headers",
    [
        {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"},  # no flags
        {"traceparent": PRODUCER.upper()},
        {"traceparent": "ff" + PRODUCER[2:]},  # the forbidden version
        {"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"},
        {"traceparent": PRODUCER + "-extra"},  # version 00 has no more fields
        {"traceparent": "garbage", "tracestate": "vendor=abc"},
        {"tracestate": "vendor=abc"},  # no traceparent
    ],
)
async def test_a_malformed_traceparent_header_is_ignored(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    response = await client.post("/v1/queues/bad/jobs", json={"type": "t"}, headers=headers)
    assert response.status_code == 201, response.text
    assert response.json()["trace"] is None
    batch = await client.post(
        "/v1/queues/bad/jobs/batch", json={"jobs": [{"type": "t"}]}, headers=headers
    )
    assert batch.status_code == 201, batch.text
    assert (await _job(client, batch.json()["jobs"][0]["id"]))["trace"] is None


async def test_a_repeated_traceparent_header_is_ignored(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/queues/twice/jobs",
        json={"type": "t"},
        headers=[("traceparent", PRODUCER), ("traceparent", OWN)],
    )
    assert response.status_code == 201, response.text
    assert response.json()["trace"] is None


async def test_a_malformed_tracestate_header_is_dropped_alone(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/queues/state/jobs",
        json={"type": "t"},
        headers={"traceparent": PRODUCER, "tracestate": "Upper=1"},
    )
    assert response.status_code == 201, response.text
    assert response.json()["trace"] == {"traceparent": PRODUCER, "tracestate": None}
    # repeated tracestate headers are one list
    joined = await client.post(
        "/v1/queues/state/jobs",
        json={"type": "t"},
        headers=[("traceparent", PRODUCER), ("tracestate", "a=1"), ("tracestate", "b=2")],
    )
    assert joined.json()["trace"] == {"traceparent": PRODUCER, "tracestate": "a=1,b=2"}


@pytest.mark.parametrize(
    ("trace", "field"),
    [
        ({"traceparent": "garbage"}, "traceparent"),
        ({"traceparent": PRODUCER.upper()}, "traceparent"),
        ({"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"}, "traceparent"),
        ({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01"}, "traceparent"),
        ({"traceparent": "ff" + PRODUCER[2:]}, "traceparent"),
        ({"traceparent": PRODUCER + "-extra"}, "traceparent"),
        ({"traceparent": PRODUCER, "tracestate": "=novalue"}, "tracestate"),
        ({"traceparent": PRODUCER, "tracestate": THIRTY_THREE}, "tracestate"),
        ({"traceparent": PRODUCER, "tracestate": ""}, "tracestate"),
        ({"tracestate": "k=v"}, "traceparent"),
        ({"traceparent": PRODUCER, "baggage": "x"}, "baggage"),
    ],
)
async def test_a_malformed_trace_field_is_refused(
    client: httpx.AsyncClient, trace: dict[str, str], field: str
) -> None:
    response = await client.post("/v1/queues/bad/jobs", json={"type": "t", "trace": trace})
    body = assert_problem(response, 422, "validation_error")
    assert ["body", "trace", field] in [error["loc"] for error in body["errors"]]
    batch = await client.post(
        "/v1/queues/bad/jobs/batch", json={"jobs": [{"type": "t"}, {"type": "t", "trace": trace}]}
    )
    body = assert_problem(batch, 422, "validation_error")
    assert ["body", "jobs", 1, "trace", field] in [error["loc"] for error in body["errors"]]


async def test_a_later_version_traceparent_with_more_fields_is_taken(
    client: httpx.AsyncClient,
) -> None:
    future = "cc" + PRODUCER[2:] + "-what-comes-next"
    job = await enqueue(client, "future", trace={"traceparent": future})
    assert job["trace"]["traceparent"] == future
