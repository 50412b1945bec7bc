"""The audit log, route by route: every admin route of the app (walked from its route
table, named as the OpenAPI document names it) records each call, by the admin key, by
a key without the scope and by an unknown key; no other route records anything, and no
GET ever does. The requests are the auth matrix's examples, so a new route fails here
until it has one, and a new admin route fails until it is recorded."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import pytest

from app.keys import declared_access, served_routes
from app.main import create_app
from tests.api.test_auth_matrix import EXAMPLES, ROUTES, Matrix, matrix

__all__ = ["matrix"]  # the auth matrix's fixture: its service and its keys

pytestmark = pytest.mark.usefixtures("no_keys")

KEY_NAMES = {"admin": "admin", "read": "read", "unknown": None}  # create_key names a key by scope


def _operation_ids(document: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {
        (method.upper(), path): operation["operationId"]
        for path, item in document["paths"].items()
        for method, operation in item.items()
    }


async def _rows_after(db: asyncpg.Connection, last: int) -> list[asyncpg.Record]:
    return await db.fetch("SELECT * FROM jobq.audit_log WHERE id > $1 ORDER BY id", last)


async def _last(db: asyncpg.Connection) -> int:
    return int(await db.fetchval("SELECT coalesce(max(id), 0) FROM jobq.audit_log"))


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
async def test_every_admin_route_records_each_call_and_no_other_route_does(
    matrix: Matrix, db: asyncpg.Connection, method: str, path: str
) -> None:
    app = matrix.service.app
    need = declared_access(app)[(method, path)]
    operation = _operation_ids(app.openapi()).get((method, path))
    admin_action = need == "admin" and method != "GET"
    assert not admin_action or operation is not None, f"{method} {path} is not documented"
    example = EXAMPLES.get((method, path))
    assert example is not None, f"add an example request for {method} {path} to test_auth_matrix"
    for kind, key_name in KEY_NAMES.items():
        last = await _last(db)
        outcome = await example(matrix, kind)
        rows = await _rows_after(db, last)
        assert [r for r in rows if r["method"] == "GET"] == [], "a GET was recorded"
        mine = [r for r in rows if operation is not None and r["action"] == operation]
        if not admin_action:
            assert mine == [], f"{method} {path} ({need}) is not an admin action"
            continue
        assert len(mine) == 1, f"{kind}: {method} {path} recorded {len(mine)} rows"
        (row,) = mine
        assert (row["key_name"], row["method"], row["status"]) == (key_name, method, outcome.status)
        assert row["request_id"], "no request id"
        if kind != "admin":
            assert row["status"] in (401, 403), f"{kind} was let in: {row}"
        text = json.dumps([dict(r) for r in rows], default=str)
        for secret in [key for key in matrix.keys.values() if key] + ["whsec_"]:
            assert secret not in text, f"{kind}: a key or secret was recorded: {text}"


def test_the_data_plane_is_not_captured() -> None:
    """Only admin routes go through the capture: the producers' and workers' routes (and
    every read) are handled as FastAPI handles them."""
    routes = served_routes(create_app())
    captured = {getattr(route, "audited_action", None) for route in routes} - {None}
    hot = {"enqueueJob", "enqueueJobs", "leaseJobs", "heartbeatLease", "completeLease"}
    assert captured and not captured & (hot | {"failLease", "snoozeLease", "ackLeases"})
