"""Each view (`app/*/views.py`) is the one mapping from its rows to a response, and its
response schema is the one list of the fields: every view builds exactly its schema's
fields, in the schema's order, at every depth, so that what it answers is byte for byte
what the schema serializes (the job views' answers skip FastAPI's validation on the hot
path: `app.api.answers`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from types import NoneType, UnionType
from typing import Any, Literal, TypeVar, Union, cast, get_args, get_origin, get_type_hints
from uuid import UUID

import pydantic_core
import pytest
from fastapi import Response
from pydantic import BaseModel, ValidationError

from app.core.errors import LeaseLost, LeaseNotFound
from app.delivery import BreakerState, Secrets, new_secret
from app.jobs import schemas as job_schemas
from app.jobs import views as job_views
from app.jobs.rows import BatchItem, Dependency, Enqueued, FinishedBrief, JobRow, Parent
from app.jobs.service import Finished, Heartbeat, Lease
from app.keys import views as key_views
from app.keys.rows import KeyRow
from app.keys.schemas import KeyOut
from app.push import PushDeliveries, PushTarget
from app.push.rows import PushStatsRow
from app.queues import rows as q
from app.queues import schemas as queue_schemas
from app.queues import views as queue_views
from app.queues.service.stats import QueueReport, QueuesReport
from app.schedules import views as schedule_views
from app.schedules.rows import RunRow, ScheduleRow
from app.schedules.schemas import ScheduleOut, SchedulesOut
from app.schedules.service import Schedule

NOW = datetime(2026, 11, 22, 4, 8, 33, 280955, tzinfo=UTC)
SIMPLE: dict[Any, Any] = {
    int: 3, float: 2.5, str: "s", bool: True, datetime: NOW, bytes: b"x",
    UUID: UUID(int=7), Any: {"any": [1, 0.5, None]},
}  # fmt: skip


R = TypeVar("R", bound=tuple[Any, ...])
# a fair queue's settings: an ordering the schema names, weights that are numbers
FAIR = {"ordering": "fair", "fair_weights": {"gold": 3.0}}


def row(kind: type[R], **given: Any) -> R:
    """A `kind` named tuple with a value of its type in each field (never None), but for
    those `given`."""
    hints = get_type_hints(kind)
    made: R = cast(Any, kind)(**{name: given.get(name, _value(t)) for name, t in hints.items()})
    return made


def _value(annotation: Any) -> Any:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return args[0]
    if origin in (Union, UnionType):
        return _value(next(a for a in args if a is not NoneType))
    if origin is list:
        return [_value(args[0])]
    if origin is dict or annotation is dict:
        return {"k": "v"}
    return SIMPLE[annotation]


def _attempt(number: int, outcome: str) -> dict[str, Any]:
    """A recorded attempt as jsonb holds it."""
    return {
        "attempt": number, "lease_id": str(UUID(int=number)), "worker_id": "w", "key_id": 1,
        "started_at": NOW.isoformat(), "finished_at": NOW.isoformat(), "outcome": outcome,
        "error": {"type": "E", "message": "m"} if outcome != "succeeded" else None,
    }  # fmt: skip


FAILED_ONCE = {"attempts": [_attempt(1, "failed")], "last_error": {"type": "E"}}
RUNNING = row(JobRow, state="running", **FAILED_ONCE)
# A succeeded job's last attempt is its own columns; a queued one has no progress.
SUCCEEDED = row(JobRow, state="succeeded", attempt=2, **FAILED_ONCE)
QUEUED = row(JobRow, state="queued", attempts=[], progress_updated_at=None, lease_id=None)
JOBS = [RUNNING, SUCCEEDED, QUEUED]
BRIEF = row(FinishedBrief, state="succeeded")
SCHEDULE = Schedule(row(ScheduleRow, catch_up="latest"), [NOW], [row(RunRow, job_state="failed")])
LIMITS = row(q.QueueLimits)
REPORT = QueueReport(
    "q",
    q.QueueFigures(
        row(q.QueueOverview), row(q.QueueActivity, wait_seconds=[1.0, 2.0], run_seconds=[3.0, 4.0])
    ),
    [row(q.RunningJob), row(q.RunningJob, progress_updated_at=None)],
    LIMITS,
    unserved=[row(q.UnservedType)],
)
EMPTY_REPORT = QueueReport("new", None, [], None, known=False)
DELIVERIES = PushDeliveries(
    PushTarget("mail", "https://hooks.example.com/jobq", Secrets([new_secret()])),
    PushStatsRow("mail", 3, 40, {"2xx": 3}, {"2xx": 38, "5xx": 2}, [0.01, 0.2], [0.01, 0.5]),
    BreakerState("queue:mail", open_until=datetime(2026, 1, 1, tzinfo=UTC)),
)

# (what the view is given, in words; the view's answer; the schema that lists its fields)
CASES: list[tuple[str, Callable[[], Any], type[BaseModel]]] = [
    *[(f"job {j.state}", lambda j=j: job_views.job(j), job_schemas.JobOut) for j in JOBS],
    ("job answer", lambda: job_views.job_answer(RUNNING), job_schemas.JobOut),
    ("enqueued", lambda: job_views.enqueued(Enqueued(QUEUED, False)), job_schemas.EnqueuedJob),
    (
        "deduplicated brief",
        lambda: job_views.deduplicated_brief(Enqueued(SUCCEEDED, True)),
        job_schemas.DeduplicatedBrief,
    ),
    ("batch", lambda: job_views.batch([row(BatchItem, state="queued")]), job_schemas.BatchOut),
    ("page", lambda: job_views.page(JOBS, len(JOBS)), job_schemas.JobsPage),
    (
        "leases",
        lambda: job_views.leases(
            [
                Lease("1-a", NOW, RUNNING, [row(Parent, state="succeeded")]),
                Lease("2-b", NOW, QUEUED, []),
            ]
        ),
        job_schemas.LeasesOut,
    ),
    (
        "dependencies",
        lambda: job_views.dependencies(
            [row(Dependency, side=side, state="waiting") for side in ("parent", "child")]
        ),
        job_schemas.DependenciesOut,
    ),
    (
        "heartbeat",
        lambda: job_views.heartbeat(Heartbeat("1-a", NOW, False, True)),
        job_schemas.HeartbeatOut,
    ),
    (
        "acks",
        lambda: job_views.acks(
            [
                Finished("1-a", BRIEF, None),
                Finished("2-b", BRIEF, LeaseLost()),
                Finished("3-c", None, LeaseNotFound()),
            ]
        ),
        job_schemas.AcksOut,
    ),
    ("queue state", lambda: queue_views.state(row(q.QueueState)), queue_schemas.QueueStateOut),
    (
        "queue settings",
        lambda: queue_views.settings(row(q.QueueSettingsRow, **FAIR)),
        queue_schemas.QueueSettingsOut,
    ),
    (
        "unlimited queue settings",
        lambda: queue_views.settings(
            row(q.QueueSettingsRow, **FAIR, rate_limit_jobs=None, aging_seconds=None)
        ),
        queue_schemas.QueueSettingsOut,
    ),
    ("queue", lambda: queue_views.queue(REPORT), queue_schemas.QueueStats),
    ("queue never named", lambda: queue_views.queue(EMPTY_REPORT), queue_schemas.QueueStats),
    ("queue detail", lambda: queue_views.queue_detail(REPORT, None), queue_schemas.QueueDetail),
    (
        "pushed queue detail",
        lambda: queue_views.queue_detail(REPORT, DELIVERIES),
        queue_schemas.QueueDetail,
    ),
    ("limits", lambda: queue_views.limits(LIMITS), queue_schemas.QueueLimitsOut),
    ("database", lambda: queue_views.database(row(q.DatabaseHealth)), queue_schemas.DatabaseHealth),
    (
        "queues",
        lambda: queue_views.queues(
            QueuesReport([REPORT, EMPTY_REPORT], row(q.DatabaseHealth)), bool
        ),
        queue_schemas.QueuesStats,
    ),
    ("schedule", lambda: schedule_views.schedule(SCHEDULE), ScheduleOut),
    ("schedules", lambda: schedule_views.page([SCHEDULE], 1), SchedulesOut),
    ("key", lambda: key_views.key(row(KeyRow, scopes=["read"])), KeyOut),
]


def _content(answer: Any) -> tuple[Any, bytes]:
    """An answer's JSON, and its bytes."""
    body = bytes(answer.body) if isinstance(answer, Response) else pydantic_core.to_json(answer)
    return json.loads(body), body


def _differences(got: Any, want: Any, at: str) -> list[str]:
    """Where `got` lacks, adds or misorders the fields of `want`, by their path."""
    if isinstance(got, dict) and isinstance(want, dict):
        if list(got) != list(want):
            missing = [f"`{at}{k}`" for k in want if k not in got]
            extra = [f"`{at}{k}`" for k in got if k not in want]
            if missing or extra:
                return [
                    f"lacks {', '.join(missing) or 'nothing'}, adds {', '.join(extra) or 'nothing'}"
                ]
            return [f"has the fields of `{at or '.'}` in another order: {list(got)}"]
        return [d for k in want for d in _differences(got[k], want[k], f"{at}{k}.")]
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        return [d for g, w in zip(got, want, strict=True) for d in _differences(g, w, at)]
    return []


@pytest.mark.parametrize(("case", "view", "schema"), CASES, ids=[c[0] for c in CASES])
def test_the_view_builds_exactly_its_schemas_fields(
    case: str, view: Callable[[], Any], schema: type[BaseModel]
) -> None:
    got, body = _content(view())
    try:
        serialized = schema.model_validate(got).model_dump_json().encode()
    except ValidationError as exc:
        pytest.fail(f"the {case} view does not build a {schema.__name__}: {exc}")
    problems = _differences(got, json.loads(serialized), "")
    assert not problems, f"the {case} view, against {schema.__name__}: " + "; ".join(problems)
    assert body == serialized


def test_a_field_added_to_a_schema_is_named() -> None:
    class Wider(job_schemas.JobOut):
        shiny: int = 0

    got, _ = _content(job_views.job(RUNNING))
    want = json.loads(Wider.model_validate(got).model_dump_json())
    assert _differences(got, want, "") == ["lacks `shiny`, adds nothing"]


def test_a_pushed_queue_shows_its_targets_host_only() -> None:
    push = queue_views.queue_detail(REPORT, DELIVERIES)["push"]
    assert push["target_host"] == "hooks.example.com"
    assert push["last_hour"]["classes"]["5xx"] == 2 and push["last_hour"]["classes"]["4xx"] == 0
    assert push["last_minute"]["latency_seconds"] == {"p50": 0.01, "p95": 0.2}
    assert push["breaker"]["state"] == "closed"  # its pause is over
