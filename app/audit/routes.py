"""The audit log: `GET /v1/audit`, newest first (`admin` only)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from app.api.openapi import problems
from app.api.types import Timestamp
from app.audit import views
from app.audit.schemas import ACTION_PATTERN, DEFAULT_AUDIT_PAGE, MAX_AUDIT_PAGE, AuditPage
from app.audit.service import AuditFilter, AuditLog
from app.core.names import MAX_BIGINT, MAX_NAME_LENGTH, NAME_PATTERN
from app.keys import AdminCaller, KeyedRoute

router = APIRouter(route_class=KeyedRoute, prefix="/v1", tags=["admin"])


def _audit(request: Request) -> AuditLog:
    """The audit log's service: the `audit` of the app's `Services` (`app.services`;
    not a FastAPI dependency: see `app.jobs.routes.deps`)."""
    audit: AuditLog = request.app.state.services.audit
    return audit


@router.get(
    "/audit",
    operation_id="listAudit",
    response_model=AuditPage,
    responses=problems(401, 403, 422),
)
async def list_audit(
    _caller: AdminCaller,
    request: Request,
    key: Annotated[
        str | None,
        Query(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH, description="Only this key's."),
    ] = None,
    action: Annotated[
        str | None,
        Query(
            pattern=ACTION_PATTERN,
            max_length=MAX_NAME_LENGTH,
            description="Only this action's (an operation id: `purgeQueue`).",
        ),
    ] = None,
    queue: Annotated[
        str | None,
        Query(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH, description="Only this queue's."),
    ] = None,
    since: Annotated[
        Timestamp | None, Query(description="Only entries written at or after this time.")
    ] = None,
    before: Annotated[
        int | None,
        Query(ge=1, le=MAX_BIGINT, description="The last id seen: older entries only."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_PAGE)] = DEFAULT_AUDIT_PAGE,
) -> dict[str, Any]:
    """Who did which admin action when, and how it ended (refused attempts too), newest
    first, a page at a time."""
    rows = await _audit(request).page(AuditFilter(key, action, queue, since), before, limit)
    return views.page(rows, limit)
