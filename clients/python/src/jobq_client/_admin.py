"""What the operator calls answer: schedules, queue settings, queue figures, the
service's figures as a whole, the audit log, and workers."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from jobq_client._models import JobState, _required_time, _time

CatchUp = Literal["latest", "none", "all"]


@dataclass(frozen=True, slots=True)
class ScheduleRun:
    """A tick and the job it made (`job_state` None once retention deleted the job)."""

    tick: datetime
    job_id: int | None
    job_state: JobState | None
    refused: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScheduleRun:
        return cls(
            _required_time(data["tick"]),
            data.get("job_id"),
            data.get("job_state"),
            data.get("refused"),
        )


@dataclass(frozen=True, slots=True)
class Schedule:
    """A cron schedule, its next ticks, and the last jobs it made."""

    name: str
    queue: str
    type: str
    cron: str
    timezone: str
    created_at: datetime
    updated_at: datetime
    payload: Any = None
    priority: int = 0
    max_attempts: int | None = None
    lease_seconds: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    paused: bool = False
    catch_up: CatchUp = "latest"
    catch_up_limit: int = 100
    last_tick: datetime | None = None
    next_runs: list[datetime] = field(default_factory=list)
    recent_runs: list[ScheduleRun] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Schedule:
        return cls(
            name=data["name"],
            queue=data["queue"],
            type=data["type"],
            cron=data["cron"],
            timezone=data["timezone"],
            created_at=_required_time(data["created_at"]),
            updated_at=_required_time(data["updated_at"]),
            payload=data.get("payload"),
            priority=data.get("priority", 0),
            max_attempts=data.get("max_attempts"),
            lease_seconds=data.get("lease_seconds"),
            metadata=data.get("metadata") or {},
            paused=bool(data.get("paused", False)),
            catch_up=data.get("catch_up", "latest"),
            catch_up_limit=data.get("catch_up_limit", 100),
            last_tick=_time(data.get("last_tick")),
            next_runs=[_required_time(t) for t in data.get("next_runs") or []],
            recent_runs=[ScheduleRun.from_json(r) for r in data.get("recent_runs") or []],
        )


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most `jobs` leases in any `per_seconds`."""

    jobs: int
    per_seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"jobs": self.jobs, "per_seconds": self.per_seconds}


Ordering = Literal["fifo", "fair"]


@dataclass(frozen=True, slots=True)
class Aging:
    """A queued job's priority rises by 1 per `per_seconds` waited, by at most `max_boost`."""

    per_seconds: float
    max_boost: int

    def to_json(self) -> dict[str, Any]:
        return {"per_seconds": self.per_seconds, "max_boost": self.max_boost}


@dataclass(frozen=True, slots=True)
class PushTarget:
    """Where a pushed queue's jobs are POSTed, as an operator sets it: `secrets`
    (`whsec_…`, newest first; two while rotating) are write-only, None keeps the
    current ones.

        jobq.set_queue_settings("emails", push=PushTarget(
            "https://jobs.example.com/hooks/jobq", secrets=["whsec_…"]))
        jobq.set_queue_settings("emails", push=None)  # pulled by workers again
    """

    url: str
    secrets: list[str] | None = None
    headers: dict[str, str] | None = None  # None: none
    timeout_seconds: float | None = None  # None: the service's default (30 s)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"url": self.url}
        for name in ("secrets", "headers", "timeout_seconds"):
            if getattr(self, name) is not None:
                body[name] = getattr(self, name)
        return body


@dataclass(frozen=True, slots=True)
class PushTargetInfo:
    """A pushed queue's target as the service shows it: headers by name, secrets by
    fingerprint (the first hex digits of each one's SHA-256)."""

    url: str
    header_names: list[str]
    timeout_seconds: float
    secret_fingerprints: list[str]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PushTargetInfo:
        return cls(
            data["url"],
            list(data.get("header_names") or []),
            float(data["timeout_seconds"]),
            list(data.get("secret_fingerprints") or []),
        )


@dataclass(frozen=True, slots=True)
class PushBreaker:
    """A pushed queue's circuit breaker: `open` holds its deliveries back until
    `open_until`; `half_open`: a pause is over, the next failure opens it again."""

    state: Literal["closed", "open", "half_open"]
    failures: int  # consecutive failed deliveries
    trips: int  # times it opened since the last success
    open_until: datetime | None
    failed_at: datetime | None
    last_error: str | None  # the last failure: its class and an excerpt

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PushBreaker:
        return cls(
            data["state"],
            int(data["failures"]),
            int(data["trips"]),
            _time(data.get("open_until")),
            _time(data.get("failed_at")),
            data.get("last_error"),
        )


@dataclass(frozen=True, slots=True)
class PushHealth:
    """A pushed queue's target and its circuit breaker (`Client.get_push_health`)."""

    queue: str
    target: PushTargetInfo
    breaker: PushBreaker

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PushHealth:
        return cls(
            data["queue"],
            PushTargetInfo.from_json(data["target"]),
            PushBreaker.from_json(data["breaker"]),
        )


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """A queue's settings; None: no limit, or the service's default."""

    queue: str
    max_backlog: int | None = None
    max_running: int | None = None
    max_running_per_key: int | None = None
    rate_limit: RateLimit | None = None
    max_attempts: int | None = None
    lease_seconds: int | None = None
    backoff_base_seconds: float | None = None
    backoff_cap_seconds: float | None = None
    backoff_jitter: float | None = None
    retain_succeeded_seconds: float | None = None
    retain_failed_seconds: float | None = None
    ordering: Ordering = "fifo"  # or "fair": leases take turns across fairness keys
    fair_weights: dict[str, float] | None = None
    rate_limit_per_key: RateLimit | None = None
    aging: Aging | None = None
    push: PushTargetInfo | None = None  # None: workers lease its jobs
    timeout_seconds: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QueueSettings:
        rate = data.get("rate_limit")
        per_key = data.get("rate_limit_per_key")
        aging = data.get("aging")
        push = data.get("push")
        return cls(
            queue=data["queue"],
            max_backlog=data.get("max_backlog"),
            max_running=data.get("max_running"),
            max_running_per_key=data.get("max_running_per_key"),
            rate_limit=RateLimit(rate["jobs"], rate["per_seconds"]) if rate else None,
            max_attempts=data.get("max_attempts"),
            lease_seconds=data.get("lease_seconds"),
            backoff_base_seconds=data.get("backoff_base_seconds"),
            backoff_cap_seconds=data.get("backoff_cap_seconds"),
            backoff_jitter=data.get("backoff_jitter"),
            retain_succeeded_seconds=data.get("retain_succeeded_seconds"),
            retain_failed_seconds=data.get("retain_failed_seconds"),
            ordering=data.get("ordering") or "fifo",
            fair_weights=data.get("fair_weights"),
            rate_limit_per_key=RateLimit(per_key["jobs"], per_key["per_seconds"])
            if per_key
            else None,
            aging=Aging(aging["per_seconds"], aging["max_boost"]) if aging else None,
            push=PushTargetInfo.from_json(push) if push else None,
            timeout_seconds=data.get("timeout_seconds"),
        )


@dataclass(frozen=True, slots=True)
class QueueStats:
    """A queue's figures: jobs by state, its oldest due job's age, its limits' use.

    `raw` is the whole answer of `GET /v1/queues/{queue}` (windows, percentiles, running
    jobs) for what this class does not name.
    """

    queue: str
    paused: bool
    counts: dict[str, int]
    oldest_due_age_seconds: float | None
    limits: dict[str, Any] | None
    raw: dict[str, Any]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QueueStats:
        return cls(
            queue=data["queue"],
            paused=bool(data.get("paused", False)),
            counts=dict(data.get("counts") or {}),
            oldest_due_age_seconds=data.get("oldest_due_age_seconds"),
            limits=data.get("limits"),
            raw=data,
        )


@dataclass(frozen=True, slots=True)
class Stats:
    """Every known queue's figures, and the database's health as the service sees it
    (dead tuples, the last autovacuum, the oldest open transaction, the reaper's last
    pass: `GET /v1/queues`'s `database`, as sent)."""

    queues: list[QueueStats]
    database: dict[str, Any]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Stats:
        return cls([QueueStats.from_json(q) for q in data["queues"]], dict(data["database"]))


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One admin action, or a refused attempt at one (`status` 401 or 403).

    `key` is the API key's name (None: the service ran open, or the token sent named no
    key); `action` the route's operation id (`purgeQueue`); `detail` what the
    request's body asked for, without payloads, URLs or secrets.
    """

    id: int
    at: datetime
    key: str | None
    action: str
    method: str
    path: str
    status: int
    request_id: str
    queue: str | None = None
    job_id: int | None = None
    target: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AuditEntry:
        return cls(
            id=data["id"],
            at=_required_time(data["at"]),
            key=data.get("key"),
            action=data["action"],
            method=data["method"],
            path=data["path"],
            status=data["status"],
            request_id=data.get("request_id", ""),
            queue=data.get("queue"),
            job_id=data.get("job_id"),
            target=data.get("target"),
            detail=data.get("detail") or {},
        )


@dataclass(frozen=True, slots=True)
class AuditPage:
    """Audit entries newest first; pass `next_before` as `before` for the next page."""

    entries: list[AuditEntry]
    next_before: int | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AuditPage:
        entries = [AuditEntry.from_json(e) for e in data.get("entries") or []]
        return cls(entries, data.get("next_before"))


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker seen lately, idle or busy (`status` `live`, or `gone` once unseen for the
    service's `JOBQ_WORKER_GONE_SECONDS`): what it is, what it serves, the jobs it holds
    and its throughput, and whether it is quiet (asked to lease no more)."""

    worker_id: str
    status: Literal["live", "gone"]
    sdk: str | None = None
    version: str | None = None
    host: str | None = None
    queues: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    running: int = 0
    job_ids: list[int] = field(default_factory=list)
    next_expiry: datetime | None = None
    leased: int = 0
    finished: int = 0
    finished_per_minute: float = 0.0
    quiet: bool = False
    quiet_at: datetime | None = None
    quieted_by: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkerInfo:
        return cls(
            worker_id=data["worker_id"],
            status=data["status"],
            sdk=data.get("sdk"),
            version=data.get("version"),
            host=data.get("host"),
            queues=list(data.get("queues") or []),
            types=list(data.get("types") or []),
            first_seen=_time(data.get("first_seen")),
            last_seen=_time(data.get("last_seen")),
            running=int(data.get("running", 0)),
            job_ids=list(data.get("job_ids") or []),
            next_expiry=_time(data.get("next_expiry")),
            leased=int(data.get("leased", 0)),
            finished=int(data.get("finished", 0)),
            finished_per_minute=float(data.get("finished_per_minute", 0)),
            quiet=bool(data.get("quiet", False)),
            quiet_at=_time(data.get("quiet_at")),
            quieted_by=data.get("quieted_by"),
        )
