"""The audit trail's capture: which requests are admin actions, and what of each is kept.

**The rule, in one place.** An admin action is a request by any method but GET to a
route whose access rule needs the `admin` scope (`is_admin_action`, which `KeyedRoute`
applies to itself). Every route declares its rule (`app.keys.access`), so a new admin
route is audited without a line of its own, and the producers' and workers' routes
(enqueue, lease, heartbeat, complete, fail, snooze, acks: `enqueue` and `work`) never
are: their routes keep the framework's own handling, without a step more, and write
nothing. Reads record nothing.

**What is kept.** Who: the key's name (also of a revoked key, or of a known key sent
with a wrong secret; none when the service runs open, or when the token named no key:
a token is never written down). What: the route's operation id, the method and path,
the queue, job id and name (key, schedule or subscription) the path or the body names,
and `summary(body)`: the fields sent, their numbers and flags, and their text only for
fields that name things (`SHOWN_TEXT`); any other text (URLs, secrets, headers) and job
data (payloads, metadata) is left out, and the whole is bounded. The outcome: the
status sent. The request id, as the access log has it.

**When it is written, and why there.** As the action's answer starts, before its status
line leaves (`capture`, the `handle` of every admin route): a client that saw an answer has
its row, and the status recorded is the one sent, whichever layer answered (the access
rule's 401 or 403, FastAPI's validation, the service's problem). Requests that the key
gate refuses before any route is matched (a body sent without a valid key) are matched
to their route by `note_refused` and recorded too. Not in the action's transaction:
that would give the statement of every admin service its own audit parameter (and a
route that forgot it would go unrecorded, which the one rule above prevents); a refused
attempt has no transaction to join; and several actions are more than one statement
(settings with a push target, a key with its announcement). The cost is a window of
one insert: a process that dies between the action's commit and the row's leaves the
action unrecorded. A row that cannot be written (the database went away after the
action) never turns the answer into an error: it is logged at ERROR as `audit.lost`
with the whole entry, so the record survives in the service's log, and counted
(`jobq_audit_lost_total`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from starlette.routing import Match
from starlette.types import Message, Receive, Scope, Send

from app.api.redact import cut_tokens
from app.core import metrics
from app.core.errors import Unauthorized
from app.core.logging import REQUEST_ID, event
from app.core.names import MAX_BIGINT, MAX_NAME_LENGTH
from app.keys.access import VERDICT, Access, served_routes
from app.keys.caller import Caller

log = logging.getLogger("jobq.audit")

# Text fields of a request body that name things and are kept as sent; any other
# text is summarised as NOT_RECORDED (a new field is left out until it is listed here).
SHOWN_TEXT = frozenset(
    {
        "name",
        "queue",
        "queues",
        "type",
        "types",
        "kinds",
        "scopes",
        "cron",
        "timezone",
        "ordering",
        "catch_up",
        "confirm",
        "error_type",
        "failed_since",
        "run_at",
    }
)
# Fields never summarised, not even their shape: job data, and where secrets go.
OPAQUE = frozenset({"payload", "metadata", "headers", "secrets", "url"})
NOT_RECORDED = "[not recorded]"
MAX_TEXT = 200  # characters of a text value kept
MAX_ITEMS = 20  # items of an array kept
MAX_DEPTH = 3  # objects within objects summarised
MAX_SUMMARY_BYTES = 4096  # a larger summary keeps only the fields' names
MAX_BODY_BYTES = 256 * 1024  # of a body read for its summary
MAX_PATH = 512
TOO_LARGE = {"body": "too large to summarise"}


def is_admin_action(methods: Iterable[str], rule: Access | None) -> bool:
    """The rule: a route is audited when it changes something (any method but GET) and
    its access rule needs the `admin` scope."""
    return rule is not None and rule.need == "admin" and bool(set(methods) - {"GET", "HEAD"})


@dataclass(frozen=True, slots=True)
class AdminAction:
    """One entry of the audit log, as the request gave it."""

    key_name: str | None
    action: str  # the route's operation id
    method: str
    path: str
    queue: str | None
    job_id: int | None
    target: str | None  # the key, schedule or subscription named
    detail: dict[str, Any] = field(default_factory=dict)
    status: int = 0
    request_id: str = ""


class Trail(Protocol):
    """Where admin actions are written (`app.audit.AuditLog`)."""

    async def record(self, action: AdminAction) -> None: ...


def _clean(text: str, limit: int) -> str:
    """`text` as PostgreSQL text and jsonb hold it (no NUL, no lone surrogate), cut."""
    cut = text[:limit].replace("\x00", "")
    return cut.encode("utf-8", "replace").decode("utf-8")


def _value(name: str, value: Any, depth: int) -> Any:
    """What the summary keeps of one field's value."""
    if name in OPAQUE:
        return NOT_RECORDED
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return _clean(value, MAX_TEXT) if name in SHOWN_TEXT else NOT_RECORDED
    if isinstance(value, list):
        kept = [_value(name, item, depth) for item in value[:MAX_ITEMS]]
        return kept + ([f"... {len(value) - MAX_ITEMS} more"] if len(value) > MAX_ITEMS else [])
    if isinstance(value, dict) and depth < MAX_DEPTH:
        return _fields(value, depth + 1)
    return NOT_RECORDED


def _fields(body: Mapping[str, Any], depth: int) -> dict[str, Any]:
    items = list(body.items())
    return {_clean(str(k), MAX_NAME_LENGTH): _value(str(k), v, depth) for k, v in items[:64]}


def summary(body: bytes) -> dict[str, Any]:
    """What the audit log keeps of a request's body: see the module's docstring."""
    if not body:
        return {}
    if len(body) > MAX_BODY_BYTES:
        return dict(TOO_LARGE)
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return {"body": "not JSON"}
    if not isinstance(parsed, dict):
        return {"body": "not a JSON object"}
    kept = _fields(parsed, 1)
    if len(json.dumps(kept)) <= MAX_SUMMARY_BYTES:
        return kept
    names = sorted(kept)  # too much to keep: the fields' names, as many as fit
    while len(json.dumps({"fields": names})) > MAX_SUMMARY_BYTES:
        names.pop()
    return {"fields": names}


def _key_name(scope: Scope) -> str | None:
    """The name of the key the request sent: the caller's, or the one a refusal named."""
    verdict = scope.get(VERDICT)
    if isinstance(verdict, Caller):
        return verdict.name
    return verdict.key_name if isinstance(verdict, Unauthorized) else None


def _job_id(text: Any) -> int | None:
    if isinstance(text, str) and text.isascii() and text.isdigit() and len(text) <= 19:
        number = int(text)
        return number if number <= MAX_BIGINT else None
    return None


def _named(params: Mapping[str, Any], detail: Mapping[str, Any], name: str) -> str | None:
    """The name the path gives as `name`, else the body's (text only)."""
    value = params.get(name)
    if not isinstance(value, str):
        value = detail.get(name)
    return _clean(value, MAX_NAME_LENGTH) if isinstance(value, str) else None


def entry(scope: Scope, action: str, status: int, detail: dict[str, Any]) -> AdminAction:
    """The audit entry of a request to an admin route that was answered with `status`
    (`detail`: the `summary` of what was read of its body)."""
    params: Mapping[str, Any] = scope.get("path_params") or {}
    return AdminAction(
        key_name=_key_name(scope),
        action=action,
        method=scope["method"],
        path=_clean(cut_tokens(scope["path"]), MAX_PATH),
        queue=_named(params, detail, "queue"),
        job_id=_job_id(params.get("job_id")),
        target=_named(params, detail, "name"),
        detail=detail,
        status=status,
        request_id=REQUEST_ID.get() or "",
    )


def trail(scope: Scope) -> Trail | None:
    """The audit log of the app's `Services` (`app.services`); None before its lifespan."""
    services = getattr(scope["app"].state, "services", None)
    found: Trail | None = getattr(services, "audit", None)
    return found


async def write(scope: Scope, action: AdminAction) -> None:
    """Write `action` to the app's audit log; a failure is logged, never raised."""
    log_of = trail(scope)
    try:
        if log_of is None:
            raise RuntimeError("no audit log: the app's lifespan has not built it")
        await log_of.record(action)
    except Exception as exc:  # the action's answer goes out whatever befell its record
        metrics.AUDIT_LOST.inc()
        event(
            log,
            "audit.lost",
            "could not record %s %s (%d) in the audit log: %s",
            action.method,
            action.path,
            action.status,
            exc,
            level=logging.ERROR,
            error=str(exc),
            **{f"audit_{k}": v for k, v in asdict(action).items()},
        )


Handle = Callable[[Scope, Receive, Send], Awaitable[None]]


async def capture(
    action: str, scope: Scope, receive: Receive, send: Send, *, handle: Handle
) -> None:
    """Run an admin route's `handle`, writing its audit entry as its answer starts: the
    body as the route read it (a refused caller's is never read), the status it sent."""
    chunks: list[bytes] = []
    size = 0
    noted = False

    async def reading() -> Message:
        nonlocal size
        message = await receive()
        if message["type"] == "http.request" and size <= MAX_BODY_BYTES:
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
        return message

    async def note(status: int) -> None:
        nonlocal noted
        noted = True
        detail = summary(b"".join(chunks)) if size <= MAX_BODY_BYTES else dict(TOO_LARGE)
        await write(scope, entry(scope, action, status, detail))

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and not noted:
            await note(message["status"])
        await send(message)

    try:
        await handle(scope, reading, sending)
    except Exception:
        if not noted:  # a bug: the server answers 500
            await note(500)
        raise


async def note_refused(scope: Scope, refusal: Unauthorized) -> None:
    """Record a request refused before its route was matched (the key gate's 401), if
    its route is an admin route."""
    if scope["method"] in ("GET", "HEAD"):
        return
    for route in served_routes(scope["app"]):
        audited = getattr(route, "audited_action", None)
        if audited is None:
            continue
        match, child = route.matches(scope)
        if match is Match.FULL:
            refused = {**scope, **child, VERDICT: refusal}
            await write(scope, entry(refused, audited, refusal.status, {}))
            return
