"""Jobs that depend on others, over HTTP: a child waits (never leased) until every parent
has succeeded, is handed their results when leased, is cancelled transitively when a
parent fails for good (unless it runs anyway), and waits again when that parent is
retried. A whole graph goes in one batch call, earlier items named by `{"ref": i}`."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
import pytest

from tests.helpers import assert_problem, enqueue, lease

pytestmark = pytest.mark.pgbouncer  # [direct] and [pgbouncer]: tests/fixtures/pgbouncer.py


async def _finish(client: httpx.AsyncClient, queue: str, result: Any = None) -> dict[str, Any]:
    """Lease the one due job of `queue` and complete it with `result`."""
    (leased,) = await lease(client, queue)
    done = await client.post(f"/v1/leases/{leased['lease_id']}/complete", json={"result": result})
    assert done.status_code == 200, done.text
    return leased


async def _fail(client: httpx.AsyncClient, queue: str) -> dict[str, Any]:
    (leased,) = await lease(client, queue)
    body = {"error": {"type": "Boom"}, "retryable": False}
    failed = await client.post(f"/v1/leases/{leased['lease_id']}/fail", json=body)
    assert failed.json()["state"] == "failed", failed.text
    return leased


async def _state(client: httpx.AsyncClient, job_id: int) -> str:
    state: str = (await client.get(f"/v1/jobs/{job_id}")).json()["state"]
    return state


async def test_a_child_waits_for_its_parents_and_gets_their_results(
    client: httpx.AsyncClient,
) -> None:
    a = await enqueue(client, "parents", type="fetch")
    b = await enqueue(client, "parents", type="fetch")
    child = await enqueue(client, "children", type="merge", depends_on=[a["id"], b["id"]])
    assert (child["state"], child["waiting_for"], child["on_parent_failure"]) == (
        "waiting",
        2,
        "cancel",
    )
    assert await lease(client, "children") == []  # a waiting job is never leased

    await _finish(client, "parents", {"rows": 1})
    assert (await client.get(f"/v1/jobs/{child['id']}")).json()["waiting_for"] == 1
    assert await lease(client, "children") == []
    await _finish(client, "parents", {"rows": 2})
    assert await _state(client, child["id"]) == "queued"

    (leased,) = await lease(client, "children")
    assert leased["job"]["id"] == child["id"]
    assert leased["parents"] == [
        {"id": a["id"], "type": "fetch", "state": "succeeded", "result": {"rows": 1}},
        {"id": b["id"], "type": "fetch", "state": "succeeded", "result": {"rows": 2}},
    ]
    dependencies = (await client.get(f"/v1/jobs/{child['id']}/dependencies")).json()
    assert [p["id"] for p in dependencies["parents"]] == [a["id"], b["id"]]
    assert dependencies["children"] == []
    of_a = (await client.get(f"/v1/jobs/{a['id']}/dependencies")).json()
    assert of_a["children"] == [
        {"id": child["id"], "queue": "children", "type": "merge", "state": "running"}
    ]


async def test_a_whole_graph_in_one_batch(client: httpx.AsyncClient) -> None:
    """a → (b, c) → d, with d in another queue: each runs only after its parents."""
    graph = {
        "jobs": [
            {"type": "a"},
            {"type": "b", "depends_on": [{"ref": 0}]},
            {"type": "c", "depends_on": [{"ref": 0}]},
            {"type": "d", "depends_on": [{"ref": 1}, {"ref": 2}]},
        ]
    }
    response = await client.post("/v1/queues/g/jobs/batch", json=graph)
    assert response.status_code == 201, response.text
    items = response.json()["jobs"]
    assert [i["state"] for i in items] == ["queued", "waiting", "waiting", "waiting"]
    ran: list[str] = []
    while True:
        leased = await lease(client, "g", max_jobs=10)
        if not leased:
            break
        for item in leased:
            ran.append(item["job"]["type"])
            await client.post(
                f"/v1/leases/{item['lease_id']}/complete", json={"result": item["job"]["type"]}
            )
    assert ran[0] == "a" and sorted(ran[1:3]) == ["b", "c"] and ran[3] == "d"
    assert len(ran) == 4


async def test_bad_dependencies_are_refused_by_name(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    parent = await enqueue(client, "q")
    unknown = await client.post(
        "/v1/queues/q/jobs", json={"type": "t", "depends_on": [parent["id"], 987654]}
    )
    problem = assert_problem(unknown, 422, "validation_error")
    assert problem["errors"][0]["loc"] == ["body", "depends_on"]
    assert "987654" in problem["detail"]
    ref_alone = await client.post(
        "/v1/queues/q/jobs", json={"type": "t", "depends_on": [{"ref": 0}]}
    )
    assert assert_problem(ref_alone, 422, "validation_error")["errors"][0]["loc"] == [
        "body",
        "depends_on",
        0,
    ]
    forward = await client.post(
        "/v1/queues/q/jobs/batch",
        json={"jobs": [{"type": "t", "depends_on": [{"ref": 1}]}, {"type": "t"}]},
    )
    assert assert_problem(forward, 422, "validation_error")["errors"][0]["loc"] == [
        "body", "jobs", 0, "depends_on", 0
    ]  # fmt: skip
    itself = await client.post(
        "/v1/queues/q/jobs/batch", json={"jobs": [{"type": "t", "depends_on": [{"ref": 0}]}]}
    )
    assert_problem(itself, 422, "validation_error")
    not_a_job = await client.post("/v1/queues/q/jobs", json={"type": "t", "depends_on": [0]})
    assert_problem(not_a_job, 422, "validation_error")
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs") == 1  # nothing else stored


async def test_a_failed_parent_cancels_its_dependents_transitively(
    client: httpx.AsyncClient,
) -> None:
    parent = await enqueue(client, "p")
    child = await enqueue(client, "c", depends_on=[parent["id"]])
    grandchild = await enqueue(client, "gc", depends_on=[child["id"]])
    cleanup = await enqueue(client, "cl", depends_on=[parent["id"]], on_parent_failure="run")
    await _fail(client, "p")

    shown = (await client.get(f"/v1/jobs/{child['id']}")).json()
    assert shown["state"] == "cancelled"
    assert shown["last_error"] == {
        "type": "parent_failed",
        "message": f"parent job {parent['id']} ended failed",
        "details": {"parent_id": parent["id"], "parent_state": "failed"},
    }
    grand = (await client.get(f"/v1/jobs/{grandchild['id']}")).json()
    assert grand["state"] == "cancelled"
    assert grand["last_error"]["details"]["parent_id"] == child["id"]
    assert await _state(client, cleanup["id"]) == "queued"  # it runs anyway
    (leased,) = await lease(client, "cl")
    assert leased["parents"][0]["state"] == "failed"

    # Retrying the parent brings its cancelled dependents back to waiting, transitively.
    retried = await client.post(f"/v1/jobs/{parent['id']}/retry")
    assert retried.json()["state"] == "queued"
    assert await _state(client, child["id"]) == "waiting"
    assert await _state(client, grandchild["id"]) == "waiting"
    await _finish(client, "p")
    await _finish(client, "c")
    assert await _state(client, grandchild["id"]) == "queued"


async def test_cancelling_or_deleting_a_parent_cancels_its_dependents(
    client: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    a = await enqueue(client, "p")
    b = await enqueue(client, "p")
    waits_on_a = await enqueue(client, "c", depends_on=[a["id"]])
    waits_on_b = await enqueue(client, "c", depends_on=[b["id"]])
    assert (await client.post(f"/v1/jobs/{a['id']}/cancel")).json()["state"] == "cancelled"
    assert await _state(client, waits_on_a["id"]) == "cancelled"
    assert (await client.delete(f"/v1/jobs/{b['id']}")).status_code == 204
    deleted = (await client.get(f"/v1/jobs/{waits_on_b['id']}")).json()
    assert deleted["state"] == "cancelled"
    assert deleted["last_error"]["message"] == f"parent job {b['id']} was deleted"
    assert await db.fetchval("SELECT count(*) FROM jobq.job_dependencies") == 1  # a's edge
    # A waiting job may be cancelled itself, at once.
    c = await enqueue(client, "p")
    waiting = await enqueue(client, "c", depends_on=[c["id"]])
    assert (await client.post(f"/v1/jobs/{waiting['id']}/cancel")).json()["state"] == "cancelled"


async def test_a_parent_already_finished_counts_at_once(client: httpx.AsyncClient) -> None:
    parent = await enqueue(client, "p")
    await _finish(client, "p", "done")
    child = await enqueue(client, "c", depends_on=[parent["id"]])
    assert (child["state"], child["waiting_for"]) == ("queued", 0)
    failed = await enqueue(client, "p")
    await _fail(client, "p")
    doomed = await enqueue(client, "c", depends_on=[failed["id"]])
    assert doomed["state"] == "cancelled"
    anyway = await enqueue(client, "c", depends_on=[failed["id"]], on_parent_failure="run")
    assert anyway["state"] == "queued"


async def test_waiting_jobs_are_counted_listed_and_deduplicated(
    client: httpx.AsyncClient,
) -> None:
    parent = await enqueue(client, "p")
    body = {"type": "t", "depends_on": [parent["id"]], "idempotency_key": "wf-1"}
    first = await client.post("/v1/queues/w/jobs", json=body)
    again = await client.post("/v1/queues/w/jobs", json=body)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"] and again.json()["deduplicated"] is True
    stats = (await client.get("/v1/queues/w")).json()
    assert stats["counts"]["waiting"] == 1 and stats["counts"]["queued"] == 0
    listed = (await client.get("/v1/jobs", params={"state": "waiting"})).json()["jobs"]
    assert [j["id"] for j in listed] == [first.json()["id"]]
    metrics = (await client.get("/metrics")).text
    assert 'jobq_jobs{queue="w",state="waiting"} 1.0' in metrics
