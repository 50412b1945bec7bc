"""What no key can do with dependencies, over HTTP with real keys (issue 43): a deep chain
breaks no operator action and no reaper pass, and what one call may build is bounded; a
key names, leases and lists only its own queues' jobs; no job is left waiting for a
parent that can no longer settle it; a parent already marked is not written again."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.maintenance import Reaper
from tests.helpers import assert_problem, bearer, create_key

CHAIN = 600  # past the 300 to 500 levels where the trigger's recursion gave out

# Jobs waiting for a parent that can no longer settle them: none may ever be found.
STRANDED = """
SELECT c.id
  FROM jobq.jobs c
  JOIN jobq.job_dependencies d ON d.child_id = c.id AND NOT d.resolved
  LEFT JOIN jobq.jobs p ON p.id = d.parent_id
 WHERE c.state = 'waiting' AND (p.id IS NULL OR p.state IN ('succeeded', 'failed', 'cancelled'))
UNION
SELECT c.id
  FROM jobq.jobs c
 WHERE c.state = 'waiting'
   AND c.waiting_for > (SELECT count(*) FROM jobq.job_dependencies d
                         WHERE d.child_id = c.id AND NOT d.resolved)
"""


class Api:
    """A client calling with one key."""

    def __init__(self, client: httpx.AsyncClient, key: str) -> None:
        self.client = client
        self.headers = bearer(key)

    async def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return await self.client.request(method, path, headers=self.headers, **kwargs)

    async def enqueue(self, queue: str, **job: Any) -> dict[str, Any]:
        response = await self.call("POST", f"/v1/queues/{queue}/jobs", json={"type": "t", **job})
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body

    async def lease(self, queue: str, **extra: Any) -> list[dict[str, Any]]:
        body = {"queues": [queue], "max_jobs": 1, "worker_id": "w", **extra}
        response = await self.call("POST", "/v1/leases", json=body)
        assert response.status_code == 200, response.text
        leases: list[dict[str, Any]] = response.json()["leases"]
        return leases

    async def finish(self, queue: str, *, ok: bool = True, result: Any = None) -> int:
        (leased,) = await self.lease(queue)
        if ok:
            done = await self.call(
                "POST", f"/v1/leases/{leased['lease_id']}/complete", json={"result": result}
            )
        else:
            body = {"error": {"type": "Boom"}, "retryable": False}
            done = await self.call("POST", f"/v1/leases/{leased['lease_id']}/fail", json=body)
        assert done.status_code == 200, done.text
        job_id: int = leased["job"]["id"]
        return job_id

    async def state(self, job_id: int) -> str:
        state: str = (await self.call("GET", f"/v1/jobs/{job_id}")).json()["state"]
        return state


@pytest.fixture
async def keys(database_url: str, no_keys: asyncpg.Connection) -> dict[str, str]:
    """An admin key, and two keys limited to one queue each (dropped after the test)."""
    del no_keys
    return {
        "admin": await create_key(database_url, "admin", ["admin"]),
        "qa": await create_key(database_url, "qa", ["enqueue", "work", "read"], ["qa"]),
        "deep": await create_key(database_url, "deep", ["enqueue", "work", "read"], ["deep"]),
    }


@pytest.fixture
async def service(
    app_factory: Callable[..., FastAPI], client_factory: Callable[[FastAPI], Any]
) -> tuple[FastAPI, httpx.AsyncClient]:
    """A replica that lets chains grow to CHAIN + 1 jobs (the default stops them at 100)."""
    app = app_factory(max_dependency_depth=CHAIN + 1)
    return app, await client_factory(app)


async def _chain(api: Api, queue: str, root: int, length: int) -> list[int]:
    """`length` jobs in one batch, the first waiting for `root`, each for the one before."""
    jobs: list[dict[str, Any]] = [{"type": "link", "depends_on": [root]}]
    jobs += [{"type": "link", "depends_on": [{"ref": i}]} for i in range(length - 1)]
    response = await api.call("POST", f"/v1/queues/{queue}/jobs/batch", json={"jobs": jobs})
    assert response.status_code == 201, response.text
    return [item["id"] for item in response.json()["jobs"]]


async def _states(db: asyncpg.Connection, ids: list[int]) -> set[str]:
    rows = await db.fetch("SELECT DISTINCT state::text FROM jobq.jobs WHERE id = ANY($1)", ids)
    return {row["state"] for row in rows}


# ---- point 1: a deep chain, and the limits on what one call builds ------------------------


async def test_a_deep_chain_is_cancelled_retried_deleted_and_purged(
    service: tuple[FastAPI, httpx.AsyncClient], keys: dict[str, str], db: asyncpg.Connection
) -> None:
    _, client = service
    deep, admin = Api(client, keys["deep"]), Api(client, keys["admin"])
    root = await deep.enqueue("deep", max_attempts=1)
    chain = await _chain(deep, "deep", root["id"], CHAIN)
    assert await _states(db, chain) == {"waiting"}

    cancelled = await admin.call("POST", f"/v1/jobs/{root['id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert await _states(db, chain) == {"cancelled"}
    last = (await admin.call("GET", f"/v1/jobs/{chain[-1]}")).json()["last_error"]
    assert last["details"] == {"parent_id": chain[-2], "parent_state": "cancelled"}

    retried = await admin.call("POST", f"/v1/jobs/{root['id']}/retry")
    assert retried.status_code == 200, retried.text
    assert await _states(db, chain) == {"waiting"}  # the whole chain, revived

    deleted = await admin.call("DELETE", f"/v1/jobs/{root['id']}")
    assert deleted.status_code == 204, deleted.text
    assert await _states(db, chain) == {"cancelled"}

    again = await deep.enqueue("deep")
    await _chain(deep, "deep", again["id"], CHAIN)
    purged = await admin.call("POST", "/v1/queues/deep/purge", json={"confirm": "deep"})
    assert purged.status_code == 200, purged.text
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs WHERE id = $1", again["id"]) == 0
    assert await db.fetch(STRANDED) == []


async def test_a_deep_chain_under_an_abandoned_lease_stops_no_reaper_pass(
    service: tuple[FastAPI, httpx.AsyncClient], keys: dict[str, str], db: asyncpg.Connection
) -> None:
    app, client = service
    deep, qa = Api(client, keys["deep"]), Api(client, keys["qa"])
    root = await deep.enqueue("deep", max_attempts=1, lease_seconds=1)
    chain = await _chain(deep, "deep", root["id"], CHAIN)
    other = await qa.enqueue("qa")
    assert [lease["job"]["id"] for lease in await deep.lease("deep")] == [root["id"]]
    assert [lease["job"]["id"] for lease in await qa.lease("qa")] == [other["id"]]
    await db.execute("UPDATE jobq.jobs SET lease_expires_at = now() - interval '1 second'")

    reaper: Reaper = app.state.services.reaper
    result = await reaper.run_once()
    assert sorted(result.job_ids) == sorted([root["id"], other["id"]])
    assert await deep.state(root["id"]) == "failed"  # its only attempt
    assert await qa.state(other["id"]) == "queued"
    assert await _states(db, chain) == {"cancelled"}

    failed = await deep.enqueue("deep", max_attempts=1)
    second = await _chain(deep, "deep", failed["id"], CHAIN)
    await deep.finish("deep", ok=False)  # a final failure cancels the chain at once
    assert await _states(db, second) == {"cancelled"}


async def test_what_one_call_builds_is_bounded(
    client: httpx.AsyncClient, keys: dict[str, str], db: asyncpg.Connection
) -> None:
    deep = Api(client, keys["deep"])
    root = await deep.enqueue("deep")
    jobs: list[dict[str, Any]] = [{"type": "link", "depends_on": [root["id"]]}]
    jobs += [{"type": "link", "depends_on": [{"ref": i}]} for i in range(100)]
    too_deep = await deep.call("POST", "/v1/queues/deep/jobs/batch", json={"jobs": jobs})
    problem = assert_problem(too_deep, 422, "validation_error")
    assert "at most 100" in problem["detail"]
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs") == 1  # all or nothing

    parents = [
        r["id"]
        for r in await db.fetch(
            "SELECT e.id FROM generate_series(1, 101), LATERAL jobq.enqueue('deep', 't') AS e"
        )
    ]
    wide = {"jobs": [{"type": "fan", "depends_on": parents} for _ in range(100)]}
    refused = await deep.call("POST", "/v1/queues/deep/jobs/batch", json=wide)
    problem = assert_problem(refused, 422, "validation_error")
    assert problem["errors"][0]["loc"] == ["body", "jobs"]
    assert "10000" in problem["detail"]


# ---- point 2: a key names, leases and lists only its own queues' jobs -----------------------


async def test_another_queues_job_is_no_parent_for_a_limited_key(
    client: httpx.AsyncClient, keys: dict[str, str], db: asyncpg.Connection
) -> None:
    admin, qa = Api(client, keys["admin"]), Api(client, keys["qa"])
    secret = await admin.enqueue("secret", payload={"card": "4111"})
    await admin.finish("secret", result={"token": "s3cr3t"})
    missing = 987654321

    answers = []
    for parent in (secret["id"], missing):
        response = await qa.call(
            "POST", "/v1/queues/qa/jobs", json={"type": "t", "depends_on": [parent]}
        )
        problem = assert_problem(response, 422, "validation_error")
        answers.append(problem["detail"].replace(str(parent), "<id>"))
        batch = {"jobs": [{"type": "t", "depends_on": [parent]}]}
        response = await qa.call("POST", "/v1/queues/qa/jobs/batch", json=batch)
        problem = assert_problem(response, 422, "validation_error")
        answers.append(problem["detail"].replace(str(parent), "<id>"))
    assert answers[:2] == answers[2:]  # exactly as for a job that does not exist
    # nothing made, and the other queue's job left as it was (not marked)
    assert await db.fetchval("SELECT count(*) FROM jobq.jobs WHERE queue = 'qa'") == 0
    assert not await db.fetchval("SELECT has_dependents FROM jobq.jobs WHERE id = $1", secret["id"])


async def test_a_limited_key_leases_and_lists_no_other_queues_jobs(
    client: httpx.AsyncClient, keys: dict[str, str]
) -> None:
    admin, qa = Api(client, keys["admin"]), Api(client, keys["qa"])
    secret = await admin.enqueue("secret")
    await admin.finish("secret", result={"token": "s3cr3t"})
    own = await qa.enqueue("qa")
    await qa.finish("qa", result={"rows": 1})
    # a wider key made a qa job that waits for both
    child = await admin.enqueue("qa", depends_on=[secret["id"], own["id"]])
    assert child["state"] == "queued"
    elsewhere = await admin.enqueue("secret", depends_on=[child["id"]])

    (leased,) = await qa.lease("qa")
    assert leased["job"]["id"] == child["id"]
    assert [p["id"] for p in leased["parents"]] == [own["id"]]  # no result of `secret`
    seen = (await qa.call("GET", f"/v1/jobs/{child['id']}/dependencies")).json()
    assert [p["id"] for p in seen["parents"]] == [own["id"]]
    assert seen["children"] == []
    wide = (await admin.call("GET", f"/v1/jobs/{child['id']}/dependencies")).json()
    assert [p["id"] for p in wide["parents"]] == [secret["id"], own["id"]]
    assert [c["id"] for c in wide["children"]] == [elsewhere["id"]]


# ---- point 5: no job waits for a parent that can no longer settle it -------------------


async def test_a_child_never_waits_for_a_parent_that_ended_for_good(
    client: httpx.AsyncClient, keys: dict[str, str], db: asyncpg.Connection
) -> None:
    admin = Api(client, keys["admin"])
    a = await admin.enqueue("p")
    b = await admin.enqueue("p")
    child = await admin.enqueue("c", depends_on=[a["id"], b["id"]])
    assert {await admin.finish("p", ok=False), await admin.finish("p", ok=False)} == {
        a["id"],
        b["id"],
    }
    assert await admin.state(child["id"]) == "cancelled"

    # The child's own retry would leave it waiting for b forever.
    refused = await admin.call("POST", f"/v1/jobs/{child['id']}/retry")
    problem = assert_problem(refused, 409, "parent_ended")
    assert str(a["id"]) in problem["detail"]
    # Its parent a retried and succeeded: b still fails it.
    assert (await admin.call("POST", f"/v1/jobs/{a['id']}/retry")).status_code == 200
    await admin.finish("p")
    shown = (await admin.call("GET", f"/v1/jobs/{child['id']}")).json()
    assert shown["state"] == "cancelled"
    assert shown["last_error"]["details"] == {"parent_id": b["id"], "parent_state": "failed"}
    assert await db.fetch(STRANDED) == []
    # b retried too: now it waits, and runs once b succeeds.
    assert (await admin.call("POST", f"/v1/jobs/{b['id']}/retry")).status_code == 200
    assert await admin.state(child["id"]) == "waiting"
    await admin.finish("p")
    assert await admin.state(child["id"]) == "queued"


async def test_deleting_a_parent_settles_its_children_whatever_its_state(
    client: httpx.AsyncClient, keys: dict[str, str], db: asyncpg.Connection
) -> None:
    admin = Api(client, keys["admin"])
    a = await admin.enqueue("p")
    b = await admin.enqueue("p")
    child = await admin.enqueue("c", depends_on=[a["id"], b["id"]])
    await admin.finish("p", ok=False)  # a
    assert await admin.state(child["id"]) == "cancelled"
    # b goes (as retention or an operator deletes it): the child names it from then on,
    assert (await admin.call("DELETE", f"/v1/jobs/{b['id']}")).status_code == 204
    shown = (await admin.call("GET", f"/v1/jobs/{child['id']}")).json()
    assert shown["last_error"]["message"] == f"parent job {b['id']} was deleted"
    # so retrying a brings nothing back to wait for b, and the child's retry is refused.
    assert (await admin.call("POST", f"/v1/jobs/{a['id']}/retry")).status_code == 200
    assert await admin.state(child["id"]) == "cancelled"
    refused = await admin.call("POST", f"/v1/jobs/{child['id']}/retry")
    assert "deleted" in assert_problem(refused, 409, "parent_ended")["detail"]

    # A waiting child of a failed parent (as a retry used to leave it) is cancelled
    # when that parent is deleted, rather than waiting with no edge left.
    failed = await admin.enqueue("f")
    waiting = await admin.enqueue("w", depends_on=[failed["id"]])
    await db.execute("UPDATE jobq.jobs SET state = 'failed' WHERE id = $1", failed["id"])
    await db.execute("UPDATE jobq.jobs SET state = 'waiting' WHERE id = $1", waiting["id"])
    assert (await admin.call("DELETE", f"/v1/jobs/{failed['id']}")).status_code == 204
    assert await admin.state(waiting["id"]) == "cancelled"
    assert await db.fetch(STRANDED) == []


# ---- point 6: a parent already marked is not written again ------------------------------


async def test_children_do_not_rewrite_a_parent_already_marked(
    client: httpx.AsyncClient, keys: dict[str, str], db: asyncpg.Connection
) -> None:
    qa = Api(client, keys["qa"])
    parents = [(await qa.enqueue("qa"))["id"] for _ in range(20)]
    await qa.enqueue("qa", depends_on=parents)
    versions = await db.fetch("SELECT id, xmin::text FROM jobq.jobs WHERE id = ANY($1)", parents)
    batch = {"jobs": [{"type": "fan", "depends_on": parents} for _ in range(50)]}
    response = await qa.call("POST", "/v1/queues/qa/jobs/batch", json=batch)
    assert response.status_code == 201, response.text
    after = await db.fetch("SELECT id, xmin::text FROM jobq.jobs WHERE id = ANY($1)", parents)
    assert sorted(map(tuple, after)) == sorted(map(tuple, versions))  # no new row versions


# ---- the reaper: one job that cannot be moved stops no one else -------------------------


async def test_a_job_the_reaper_cannot_move_is_logged_and_the_rest_are_reaped(
    client: httpx.AsyncClient,
    reaper: Reaper,
    db: asyncpg.Connection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = (await client.post("/v1/queues/a/jobs", json={"type": "t"})).json()
    second = (await client.post("/v1/queues/b/jobs", json={"type": "t"})).json()
    for queue in ("a", "b"):
        body = {"queues": [queue], "max_jobs": 1, "worker_id": "gone"}
        assert (await client.post("/v1/leases", json=body)).status_code == 200
    await db.execute("UPDATE jobq.jobs SET lease_expires_at = now() - interval '1 second'")
    await db.execute(
        f"""
        CREATE FUNCTION jobq.test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'this job cannot move'; END $$;
        CREATE TRIGGER test_refuse BEFORE UPDATE ON jobq.jobs FOR EACH ROW
            WHEN (OLD.id = {first["id"]} AND NEW.state <> OLD.state)
            EXECUTE FUNCTION jobq.test_refuse();
        """
    )
    try:
        with caplog.at_level(logging.ERROR, logger="jobq.maintenance"):
            result = await reaper.run_once()
    finally:
        await db.execute("DROP TRIGGER test_refuse ON jobq.jobs; DROP FUNCTION jobq.test_refuse()")
    assert result.job_ids == [second["id"]]
    logged = [
        getattr(r, "fields", {}).get("job_id")
        for r in caplog.records
        if getattr(r, "event", None) == "reaper.job_failed"
    ]
    assert logged == [first["id"]], caplog.text
    assert (await reaper.run_once()).job_ids == [first["id"]]  # once it can move, it does
