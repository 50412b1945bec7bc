"""Administrators: create, list and revoke API keys (the `admin` scope)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path

from app.api.auth import ADMIN
from app.api.deps import AuthDep
from app.api.openapi import problems
from app.db.repository import Row
from app.schemas import MAX_NAME_LENGTH, NAME_PATTERN, KeyCreated, KeyIn, KeyOut, KeysOut
from app.service.auth import KEY_PREFIX

router = APIRouter(prefix="/v1", tags=["keys"])
ADMIN_ONLY = [Depends(ADMIN)]

KeyNamePath = Annotated[
    str, Path(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH, description="The key's name.")
]


def _key(row: Row) -> dict[str, Any]:
    """A key row as `KeyOut`: its digest stays in the database."""
    return {
        "name": row["name"],
        "prefix": KEY_PREFIX + row["lookup_id"],
        "scopes": row["scopes"],
        "queues": row["queues"],
        "created_at": row["created_at"],
        "revoked_at": row["revoked_at"],
        "last_used_at": row["last_used_at"],
    }


@router.post(
    "/keys",
    operation_id="createKey",
    status_code=201,
    response_model=KeyCreated,
    responses=problems(400, 401, 403, 409, 413, 422),
    dependencies=ADMIN_ONLY,
)
async def create_key(request: KeyIn, auth: AuthDep) -> dict[str, Any]:
    """Create an API key; the answer holds the key, shown this once."""
    key, row = await auth.create(request.name, request.scopes, request.queues)
    return {**_key(row), "key": key}


@router.get(
    "/keys",
    operation_id="listKeys",
    response_model=KeysOut,
    responses=problems(401, 403),
    dependencies=ADMIN_ONLY,
)
async def list_keys(auth: AuthDep) -> dict[str, Any]:
    """List API keys, revoked ones too (never the keys themselves)."""
    return {"keys": [_key(row) for row in await auth.keys.list()]}


@router.delete(
    "/keys/{name}",
    operation_id="revokeKey",
    response_model=KeyOut,
    responses=problems(401, 403, 404, 422),
    dependencies=ADMIN_ONLY,
)
async def revoke_key(name: KeyNamePath, auth: AuthDep) -> dict[str, Any]:
    """Revoke an API key: it stops working at once, on every replica."""
    return _key(await auth.revoke(name))
