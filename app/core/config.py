"""Settings: one pydantic-settings class, every field read from a `JOBQ_` variable.

Defaults are named constants with their unit in the name, so the README, the
OpenAPI schema and the code agree on one number.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Final, Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_DATA_DIR = Path(".jobq")

DEFAULT_REAPER_INTERVAL_SECONDS = 5.0
DEFAULT_REAPER_BATCH_SIZE = 1000

DEFAULT_RETAIN_SUCCEEDED_SECONDS = 24 * 3600.0
DEFAULT_RETAIN_FAILED_SECONDS = 7 * 24 * 3600.0
DEFAULT_PRUNE_INTERVAL_SECONDS = 60.0
DEFAULT_VACUUM_INTERVAL_SECONDS = 30.0
DEFAULT_SCHEDULER_INTERVAL_SECONDS = 1.0
DEFAULT_PRUNE_BATCH_SIZE = 1000
DEFAULT_PRUNE_PAUSE_SECONDS = 0.5
DEFAULT_STATS_FOLD_INTERVAL_SECONDS = 1.0
DEFAULT_STATS_FOLD_BATCH_SIZE = 10_000
DEFAULT_STATS_RETENTION_DAYS = 30.0
DEFAULT_AUDIT_RETENTION_DAYS = 90.0

DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_LEASE_SECONDS = 60
MAX_LEASE_SECONDS = 43_200
MAX_TIMEOUT_SECONDS = 7 * 24 * 3600  # a job's timeout_seconds, at most (jobq.check_lifecycle)
DEFAULT_BACKOFF_BASE_SECONDS = 10.0
DEFAULT_BACKOFF_CAP_SECONDS = 3600.0
DEFAULT_BACKOFF_JITTER = 0.1

DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024
# Batch sizes and the longest lease are also the API schema's hard bounds: settings may
# lower them, never raise them.
DEFAULT_MAX_ENQUEUE_BATCH = 1000
DEFAULT_MAX_ACK_BATCH = 1000
DEFAULT_MAX_LEASE_BATCH = 100
DEFAULT_MAX_ERROR_MESSAGE_BYTES = 8 * 1024
# JSON documents (payload, metadata, result, error details) nest at most this deep. The
# hard bound keeps every stored document well inside what the response serializer can
# write back (it stops at 255 levels, counting the job around it).
DEFAULT_MAX_JSON_DEPTH = 32
MAX_JSON_DEPTH = 128
# What one caller may build out of dependencies: how many jobs a chain may hold above a
# job (its first job stands at 0), and how many `depends_on` entries one enqueue call
# (a job, or a whole batch) may carry in all. Each entry a call names is an edge to
# write and a parent to check at commit.
DEFAULT_MAX_DEPENDENCY_DEPTH = 100
MAX_DEPENDENCY_DEPTH = 10_000
DEFAULT_MAX_BATCH_DEPENDENCIES = 10_000
# A lease's row is written by heartbeats at most once per this interval (0: every time):
# often enough for a worker reporting its stages as it goes, not for a runaway loop.
DEFAULT_MAX_SNOOZES = 25  # times one job may be snoozed
DEFAULT_HEARTBEAT_MIN_INTERVAL_SECONDS = 0.1  # ten writes a second, where thousands could be
# What a producer refused with 429 `queue_full` is told to wait (Retry-After).
DEFAULT_QUEUE_FULL_RETRY_AFTER_SECONDS = 5

# Events are kept this long: the window a stream can resume in (`Last-Event-ID`), and
# subscriptions catch up in after an outage of their endpoint.
DEFAULT_EVENT_RETENTION_SECONDS = 3600.0
DEFAULT_EVENT_STAMP_INTERVAL_SECONDS = 0.1
DEFAULT_EVENT_STAMP_BATCH_SIZE = 5000
DEFAULT_EVENT_POLL_SECONDS = 1.0
DEFAULT_EVENT_HEARTBEAT_SECONDS = 15.0
DEFAULT_EVENT_PAGE_SIZE = 1000
DEFAULT_EVENT_STREAM_SECONDS = 3600.0
DEFAULT_SUBSCRIPTION_INTERVAL_SECONDS = 1.0
DEFAULT_SUBSCRIPTION_BATCH_SIZE = 100
DEFAULT_SUBSCRIPTION_TIMEOUT_SECONDS = 10.0
DEFAULT_SUBSCRIPTION_BACKOFF_BASE_SECONDS = 1.0
DEFAULT_SUBSCRIPTION_BACKOFF_CAP_SECONDS = 300.0

# Workers' presence (`app.workers`): each replica writes whom it saw this often, in one
# statement; a worker unseen for the gone interval is shown gone, then kept that long.
DEFAULT_WORKER_FLUSH_SECONDS = 2.0
DEFAULT_WORKER_GONE_SECONDS = 60.0  # three idle pings (the SDKs' every 15 s), or a long poll
DEFAULT_WORKER_RETAIN_SECONDS = 3600.0

DEFAULT_LONGPOLL_POLL_SECONDS = 1.0
DEFAULT_LONGPOLL_RECHECK_SECONDS = 5.0

DEFAULT_DB_POOL_SIZE = 10
DEFAULT_SHUTDOWN_GRACE_SECONDS = 30.0

DEFAULT_LOG_FORMAT: Final = "auto"  # JSON lines, or plain text when stderr is a terminal
DEFAULT_LOG_LEVEL: Final = "INFO"
DEFAULT_METRICS_REFRESH_SECONDS = 5.0

# Push delivery (`app.delivery`): where jobq may send requests, and when it stops trying a
# target for a while. By default any public HTTPS host (`*`); a private, loopback or
# link-local address only when a pattern names its host.
DEFAULT_PUSH_ALLOWED_TARGETS: Final = ("https://*",)
DEFAULT_PUSH_BREAKER_FAILURES = 5  # consecutive failed deliveries that open a breaker
DEFAULT_PUSH_BREAKER_PAUSE_SECONDS = 5.0  # its first pause; each further one doubles
DEFAULT_PUSH_BREAKER_MAX_PAUSE_SECONDS = 600.0
DEFAULT_PUSH_CONCURRENCY = 64  # deliveries in flight at once, per replica
DEFAULT_PUSH_LEASE_MARGIN_SECONDS = 30  # a delivery's lease outlives its timeout by this much
DEFAULT_PUSH_STATS_FLUSH_SECONDS = 5.0  # each replica writes its delivery counts this often

# `auto`: API keys are required once one exists; with none, jobq serves openly on
# loopback only and refuses to start on any other address. `disabled`: open everywhere.
AuthMode = Literal["auto", "disabled"]
DEFAULT_AUTH_CACHE_SECONDS = 2.0


class Settings(BaseSettings):
    """Every knob of the service; see the README's "Configuration" table."""

    model_config = SettingsConfigDict(env_prefix="JOBQ_", extra="ignore")

    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL; unset means an embedded server kept in data_dir.",
    )
    database_direct_url: str | None = Field(
        default=None,
        description=(
            "PostgreSQL itself when database_url is a transaction-mode pooler (PgBouncer):"
            " LISTEN and migrations use it, and prepared statements are not cached."
        ),
    )
    host: str = DEFAULT_HOST
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    url: str | None = Field(
        default=None,
        description="The service the CLI and workers call; unset: http://JOBQ_HOST:JOBQ_PORT.",
    )
    api_key: SecretStr | None = Field(
        default=None,
        description="The API key the CLI and workers send (`Authorization: Bearer`).",
    )
    data_dir: Path = DEFAULT_DATA_DIR
    db_pool_size: int = Field(default=DEFAULT_DB_POOL_SIZE, ge=1)
    workers: int = Field(default=1, ge=1, description="`jobq serve` processes sharing the port.")
    migrate_on_start: bool = Field(
        default=True, description="`jobq serve` applies pending migrations before serving."
    )
    shutdown_grace_seconds: float = Field(
        default=DEFAULT_SHUTDOWN_GRACE_SECONDS,
        gt=0,
        description="How long in-flight requests may run on after SIGTERM.",
    )

    reaper_interval_seconds: float = Field(default=DEFAULT_REAPER_INTERVAL_SECONDS, gt=0)
    reaper_batch_size: int = Field(default=DEFAULT_REAPER_BATCH_SIZE, ge=1)
    retain_succeeded_seconds: float = Field(
        default=DEFAULT_RETAIN_SUCCEEDED_SECONDS,
        ge=0,
        description="Succeeded jobs are deleted this long after they finished; 0 keeps them.",
    )
    retain_failed_seconds: float = Field(
        default=DEFAULT_RETAIN_FAILED_SECONDS,
        ge=0,
        description="Failed and cancelled jobs are deleted this long after; 0 keeps them.",
    )
    prune_interval_seconds: float = Field(default=DEFAULT_PRUNE_INTERVAL_SECONDS, gt=0)
    scheduler_interval_seconds: float = Field(
        default=DEFAULT_SCHEDULER_INTERVAL_SECONDS,
        gt=0,
        description="How often the maintenance leader looks for due schedule ticks.",
    )
    prune_batch_size: int = Field(default=DEFAULT_PRUNE_BATCH_SIZE, ge=1)
    prune_pause_seconds: float = Field(
        default=DEFAULT_PRUNE_PAUSE_SECONDS,
        ge=0,
        le=60,
        description="The pruner rests this long between two batches, so that deleting a "
        "day of history does not crowd the hot path.",
    )
    stats_fold_interval_seconds: float = Field(
        default=DEFAULT_STATS_FOLD_INTERVAL_SECONDS,
        gt=0,
        description="How often the maintenance leader folds the statistics' deltas into "
        "the per-queue counts and per-minute rollups (reads add the rest).",
    )
    stats_fold_batch_size: int = Field(
        default=DEFAULT_STATS_FOLD_BATCH_SIZE,
        ge=1,
        description="Statistics deltas folded per transaction.",
    )
    stats_retention_days: float = Field(
        default=DEFAULT_STATS_RETENTION_DAYS,
        gt=0,
        le=3660,
        description="Days the per-minute rollups (the queue charts' history) are kept.",
    )
    audit_retention_days: float = Field(
        default=DEFAULT_AUDIT_RETENTION_DAYS,
        ge=0,
        le=36600,
        description="Days the audit log's entries are kept; 0 keeps them for good.",
    )
    vacuum_interval_seconds: float = Field(
        default=DEFAULT_VACUUM_INTERVAL_SECONDS,
        ge=0,
        description="Where autovacuum is off, the leader vacuums jobq's tables this often"
        " (0: never).",
    )

    default_max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1)
    default_lease_seconds: int = Field(default=DEFAULT_LEASE_SECONDS, ge=1)
    max_lease_seconds: int = Field(default=MAX_LEASE_SECONDS, ge=1, le=MAX_LEASE_SECONDS)
    backoff_base_seconds: float = Field(default=DEFAULT_BACKOFF_BASE_SECONDS, ge=0)
    backoff_cap_seconds: float = Field(default=DEFAULT_BACKOFF_CAP_SECONDS, ge=0)
    backoff_jitter: float = Field(default=DEFAULT_BACKOFF_JITTER, ge=0, lt=1)

    max_payload_bytes: int = Field(default=DEFAULT_MAX_PAYLOAD_BYTES, ge=1)
    max_request_bytes: int = Field(default=DEFAULT_MAX_REQUEST_BYTES, ge=1)
    max_enqueue_batch: int = Field(
        default=DEFAULT_MAX_ENQUEUE_BATCH, ge=1, le=DEFAULT_MAX_ENQUEUE_BATCH
    )
    max_ack_batch: int = Field(default=DEFAULT_MAX_ACK_BATCH, ge=1, le=DEFAULT_MAX_ACK_BATCH)
    max_lease_batch: int = Field(default=DEFAULT_MAX_LEASE_BATCH, ge=1, le=DEFAULT_MAX_LEASE_BATCH)
    max_error_message_bytes: int = Field(default=DEFAULT_MAX_ERROR_MESSAGE_BYTES, ge=16)
    max_json_depth: int = Field(
        default=DEFAULT_MAX_JSON_DEPTH,
        ge=1,
        le=MAX_JSON_DEPTH,
        description="Deepest nesting of arrays and objects in a payload, metadata, result, error.",
    )
    max_dependency_depth: int = Field(
        default=DEFAULT_MAX_DEPENDENCY_DEPTH,
        ge=1,
        le=MAX_DEPENDENCY_DEPTH,
        description="Longest chain of parents above a job (`depends_on`, followed up).",
    )
    max_batch_dependencies: int = Field(
        default=DEFAULT_MAX_BATCH_DEPENDENCIES,
        ge=1,
        le=DEFAULT_MAX_BATCH_DEPENDENCIES,
        description="`depends_on` entries one enqueue call (a job or a batch) may name in all.",
    )
    max_snoozes: int = Field(
        default=DEFAULT_MAX_SNOOZES,
        ge=1,
        le=10_000,
        description="Times a worker may snooze one job; the next snooze is refused (409).",
    )
    heartbeat_min_interval_seconds: float = Field(
        default=DEFAULT_HEARTBEAT_MIN_INTERVAL_SECONDS,
        ge=0,
        le=60,
        description="Heartbeats write a lease's row (lease end, progress) at most this often.",
    )
    queue_full_retry_after_seconds: int = Field(
        default=DEFAULT_QUEUE_FULL_RETRY_AFTER_SECONDS,
        ge=1,
        description="Retry-After of a 429 `queue_full` answer.",
    )

    event_retention_seconds: float = Field(
        default=DEFAULT_EVENT_RETENTION_SECONDS,
        ge=60,
        description="Job and queue events are kept this long: a stream resumes within it.",
    )
    event_stamp_interval_seconds: float = Field(
        default=DEFAULT_EVENT_STAMP_INTERVAL_SECONDS,
        gt=0,
        le=10,
        description="How often each replica gives committed events their commit order.",
    )
    event_stamp_batch_size: int = Field(default=DEFAULT_EVENT_STAMP_BATCH_SIZE, ge=1)
    event_poll_seconds: float = Field(
        default=DEFAULT_EVENT_POLL_SECONDS,
        gt=0,
        description="How often an event stream reads new events when no announcement came.",
    )
    event_heartbeat_seconds: float = Field(
        default=DEFAULT_EVENT_HEARTBEAT_SECONDS,
        gt=0,
        description="An idle event stream sends a comment this often, to keep proxies open.",
    )
    event_page_size: int = Field(default=DEFAULT_EVENT_PAGE_SIZE, ge=1, le=10_000)
    event_stream_seconds: float = Field(
        default=DEFAULT_EVENT_STREAM_SECONDS,
        gt=0,
        description="An event stream ends after this long, with the position it read up"
        " to; clients resume from it (EventSource and the SDKs do it by themselves), on"
        " whichever replica answers.",
    )
    subscription_interval_seconds: float = Field(
        default=DEFAULT_SUBSCRIPTION_INTERVAL_SECONDS,
        gt=0,
        description="How often each replica looks for subscriptions to deliver to, besides"
        " each new event.",
    )
    subscription_batch_size: int = Field(
        default=DEFAULT_SUBSCRIPTION_BATCH_SIZE,
        ge=1,
        le=1000,
        description="Events sent to a subscription in one request, at most.",
    )
    subscription_timeout_seconds: float = Field(
        default=DEFAULT_SUBSCRIPTION_TIMEOUT_SECONDS,
        gt=0,
        le=300,
        description="How long one delivery to a subscription may take.",
    )
    subscription_backoff_base_seconds: float = Field(
        default=DEFAULT_SUBSCRIPTION_BACKOFF_BASE_SECONDS,
        gt=0,
        description="A failed delivery is retried after this, doubled at each failure.",
    )
    subscription_backoff_cap_seconds: float = Field(
        default=DEFAULT_SUBSCRIPTION_BACKOFF_CAP_SECONDS,
        gt=0,
        description="... at most this.",
    )

    worker_flush_seconds: float = Field(
        default=DEFAULT_WORKER_FLUSH_SECONDS,
        gt=0,
        le=60,
        description="How often each replica writes the workers it saw, and reads back which"
        " are quiet.",
    )
    worker_gone_seconds: float = Field(
        default=DEFAULT_WORKER_GONE_SECONDS,
        gt=0,
        description="A worker not seen for this long is listed as gone.",
    )
    worker_retain_seconds: float = Field(
        default=DEFAULT_WORKER_RETAIN_SECONDS,
        gt=0,
        description="A worker not seen for this long is no longer listed (its row is pruned).",
    )

    longpoll_poll_seconds: float = Field(
        default=DEFAULT_LONGPOLL_POLL_SECONDS,
        gt=0,
        description="How often a waiting lease re-checks while the LISTEN connection is down.",
    )
    longpoll_recheck_seconds: float = Field(
        default=DEFAULT_LONGPOLL_RECHECK_SECONDS,
        gt=0,
        description="How often a waiting lease re-checks even when no announcement came.",
    )

    log_format: Literal["auto", "json", "text"] = Field(
        default=DEFAULT_LOG_FORMAT,
        description="`json` lines, plain `text`, or `auto`: text on a terminal, else JSON.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default=DEFAULT_LOG_LEVEL, description="The least severe log records written (any case)."
    )
    access_log: bool = Field(default=True, description="Log one line per HTTP request.")
    opentelemetry: bool = Field(
        default=False,
        description="FastAPI's OpenTelemetry instrumentation: a span, metrics and logs of "
        "each request, to the providers OpenTelemetry is configured with.",
    )
    metrics_refresh_seconds: float = Field(
        default=DEFAULT_METRICS_REFRESH_SECONDS,
        ge=0,
        description="`/metrics` recomputes the gauges read from SQL at most this often.",
    )
    auth: AuthMode = Field(
        default="auto",
        description="`auto`: keys required once one exists; `disabled`: no authentication.",
    )
    auth_cache_seconds: float = Field(
        default=DEFAULT_AUTH_CACHE_SECONDS,
        ge=0,
        description="How long a verified API key is trusted without the database; 0: never.",
    )

    push_allowed_targets: Annotated[tuple[str, ...], NoDecode] = Field(
        default=DEFAULT_PUSH_ALLOWED_TARGETS,
        description="Comma-separated `scheme://host[:port]` patterns (`*`, `*.example.com`,"
        " `:*`) a push target or subscription URL must match.",
    )
    push_breaker_failures: int = Field(
        default=DEFAULT_PUSH_BREAKER_FAILURES,
        ge=1,
        description="Consecutive failed deliveries to a target that pause its deliveries.",
    )
    push_breaker_pause_seconds: float = Field(
        default=DEFAULT_PUSH_BREAKER_PAUSE_SECONDS,
        gt=0,
        description="A target's first pause; each one after it, without a success, doubles.",
    )
    push_breaker_max_pause_seconds: float = Field(
        default=DEFAULT_PUSH_BREAKER_MAX_PAUSE_SECONDS,
        gt=0,
        description="The longest pause of a target's deliveries.",
    )

    push_lease_margin_seconds: int = Field(
        default=DEFAULT_PUSH_LEASE_MARGIN_SECONDS,
        ge=1,
        le=86_400,
        description="How much longer than its target's timeout a delivery's lease lasts:"
        " how long a delivery cut short by a crash holds its job before the reaper returns"
        " it.",
    )
    push_concurrency: int = Field(
        default=DEFAULT_PUSH_CONCURRENCY,
        ge=0,
        le=10_000,
        description="Deliveries to push targets in flight at once in each replica; 0: this"
        " replica delivers none.",
    )
    push_stats_flush_seconds: float = Field(
        default=DEFAULT_PUSH_STATS_FLUSH_SECONDS,
        gt=0,
        le=3600,
        description="How often each replica adds the deliveries it counted to the shared"
        " statistics.",
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _any_case(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("push_allowed_targets", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    def service_url(self) -> str:
        """The service a client of this configuration calls: `url`, else this host's."""
        return self.url or f"http://{client_host(self.host)}:{self.port}"

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.default_lease_seconds > self.max_lease_seconds:
            raise ValueError("default_lease_seconds must not exceed max_lease_seconds")
        if self.max_payload_bytes > self.max_request_bytes:
            raise ValueError("max_payload_bytes must not exceed max_request_bytes")
        return self


def client_host(host: str) -> str:
    """Where a client on this machine reaches a service bound to `host`: a wildcard
    address (all interfaces) is reached on loopback."""
    wildcard = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}  # noqa: S104
    if host in wildcard:
        return wildcard[host]
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
