"""Workers: the listing (`read`), a presence ping (`work`), quiet and resume (`admin`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Request, Response

from app.api.openapi import OPTIONAL_BODY_TITLE, problems
from app.api.types import StorableText
from app.core.fields import MAX_TEXT_LENGTH
from app.keys import AdminCaller, Caller, KeyedRoute, ReadCaller, WorkCaller
from app.workers import views
from app.workers.schemas import (
    DEFAULT_WORKERS_PAGE,
    MAX_WORKERS_PAGE,
    QUIET_HEADER,
    HostHeader,
    PresenceIn,
    PresenceOut,
    QuietOut,
    SdkHeader,
    WorkersOut,
)
from app.workers.service import Presence, Visible, Workers

router = APIRouter(route_class=KeyedRoute, prefix="/v1", tags=["workers"])

WorkerPath = Annotated[
    StorableText,
    Path(min_length=1, max_length=MAX_TEXT_LENGTH, description="The worker's id."),
]
QUIET = {
    "headers": {
        QUIET_HEADER: {
            "description": "`1` when the worker is quiet: it should lease no more.",
            "schema": {"type": "string"},
        }
    }
}


def _workers(request: Request) -> Workers:
    """The workers' service: the `workers` of the app's `Services` (`app.services`; not
    a FastAPI dependency: see `app.jobs.routes.deps`)."""
    workers: Workers = request.app.state.services.workers
    return workers


def _presence(request: Request) -> Presence:
    presence: Presence = request.app.state.services.presence
    return presence


def _visible(caller: Caller) -> Visible:
    if caller.queues is None:
        return Visible(None, None)
    return Visible(*caller.queues.sql())


@router.get(
    "/workers",
    operation_id="listWorkers",
    response_model=WorkersOut,
    responses=problems(401, 403, 422),
)
async def list_workers(
    caller: ReadCaller,
    request: Request,
    limit: Annotated[int, Query(ge=1, le=MAX_WORKERS_PAGE)] = DEFAULT_WORKERS_PAGE,
    after: Annotated[
        StorableText | None, Query(max_length=MAX_TEXT_LENGTH, description="The last id seen.")
    ] = None,
) -> dict[str, Any]:
    """Workers by id, live and recently gone, with what they serve, their jobs and
    throughput, a page at a time (a key limited to queues sees the workers of those)."""
    rows = await _workers(request).page(_visible(caller), after, limit)
    return views.page(rows, limit)


@router.post(
    "/workers/{worker_id}/presence",
    operation_id="reportPresence",
    response_model=PresenceOut,
    responses={200: QUIET, **problems(400, 401, 403, 413, 422)},
)
async def report_presence(
    caller: WorkCaller,
    worker_id: WorkerPath,
    request: Request,
    presence: Annotated[PresenceIn | None, Body(title=OPTIONAL_BODY_TITLE)] = None,
    jobq_worker_sdk: SdkHeader = None,
    jobq_worker_host: HostHeader = None,
) -> Response:
    """Say a worker is alive while it leases nothing (idle between polls, or paused);
    answers whether it is quiet."""
    sent = presence or PresenceIn()
    if sent.queues is not None:
        caller.require_queues(sent.queues)
    quiet = _presence(request).saw(
        worker_id, sdk=jobq_worker_sdk, host=jobq_worker_host, queues=sent.queues, types=sent.types
    )
    answer = PresenceOut(worker_id=worker_id, quiet=quiet)
    response = Response(answer.model_dump_json(), media_type="application/json")
    if quiet:
        response.headers[QUIET_HEADER] = "1"
    return response


@router.post(
    "/workers/{worker_id}/quiet",
    operation_id="quietWorker",
    response_model=QuietOut,
    responses=problems(401, 403, 404, 422),
)
async def quiet_worker(
    caller: AdminCaller, worker_id: WorkerPath, request: Request
) -> dict[str, Any]:
    """Ask a worker to lease no more: its next lease answers no job (`Jobq-Worker-Quiet:
    1`); it finishes the jobs it holds."""
    row = await _workers(request).quiet(worker_id, True, caller.name)
    return views.quiet(row)


@router.post(
    "/workers/{worker_id}/resume",
    operation_id="resumeWorker",
    response_model=QuietOut,
    responses=problems(401, 403, 404, 422),
)
async def resume_worker(
    caller: AdminCaller, worker_id: WorkerPath, request: Request
) -> dict[str, Any]:
    """Let a quiet worker lease again."""
    row = await _workers(request).quiet(worker_id, False, caller.name)
    return views.quiet(row)
