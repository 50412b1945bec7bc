"""Administrators: create, list and revoke API keys (the `admin` scope)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from app.api.openapi import problems
from app.core.names import MAX_NAME_LENGTH, NAME_PATTERN
from app.keys.access import AdminCaller
from app.keys.authenticator import Authenticator
from app.keys.routing import KeyedRoute
from app.keys.schemas import KeyCreated, KeyIn, KeyOut, KeysOut
from app.keys.views import key

router = APIRouter(route_class=KeyedRoute, prefix="/v1", tags=["keys"])

KeyNamePath = Annotated[
    str, Path(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH, description="The key's name.")
]


def _authenticator(request: Request) -> Authenticator:
    """The app's authenticator: the `auth` of its `Services` (`app.services`; not a
    FastAPI dependency: see `app.jobs.routes.deps`)."""
    auth: Authenticator = request.app.state.services.auth
    return auth


@router.post(
    "/keys",
    operation_id="createKey",
    status_code=201,
    response_model=KeyCreated,
    responses=problems(400, 401, 403, 409, 413, 422),
)
async def create_key(_caller: AdminCaller, new_key: KeyIn, request: Request) -> dict[str, Any]:
    """Create an API key; the answer holds the key, shown this once."""
    auth = _authenticator(request)
    secret, row = await auth.create(new_key.name, new_key.scopes, new_key.queues)
    return {**key(row), "key": secret}


@router.get(
    "/keys",
    operation_id="listKeys",
    response_model=KeysOut,
    responses=problems(401, 403),
)
async def list_keys(_caller: AdminCaller, request: Request) -> dict[str, Any]:
    """List API keys, revoked ones too (never the keys themselves)."""
    auth = _authenticator(request)
    return {"keys": [key(row) for row in await auth.keys.list()]}


@router.delete(
    "/keys/{name}",
    operation_id="revokeKey",
    response_model=KeyOut,
    responses=problems(401, 403, 404, 422),
)
async def revoke_key(_caller: AdminCaller, name: KeyNamePath, request: Request) -> dict[str, Any]:
    """Revoke an API key: it stops working at once, on every replica."""
    auth = _authenticator(request)
    return key(await auth.revoke(name))
