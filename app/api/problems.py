"""Every error leaves as `application/problem+json` (RFC 9457) with a stable `code`.

This is the one place where exceptions become HTTP: jobq's own `JobqError`s, request
validation, unknown routes and methods, and — as a last resort — bugs, which are
logged with their traceback and answered with a bare 500 problem.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.api.redact import cut_tokens
from app.core.errors import JobqError, field_errors

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:jobq:problem:"
log = logging.getLogger("jobq.api")

# Codes for errors raised by the framework rather than by jobq.
_FRAMEWORK_CODES = {
    400: "invalid_json",  # FastAPI's "error parsing the body" (e.g. not UTF-8)
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
}
UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
HTTP_ERROR = "http_error"  # any other status the framework raises (none is known)


def codes() -> dict[str, int]:
    """Every problem `code` jobq answers with, and its status (clients mirror these)."""

    def tree(cls: type[JobqError]) -> list[type[JobqError]]:
        return [cls, *(c for sub in cls.__subclasses__() for c in tree(sub))]

    found = {cls.code: cls.status for cls in tree(JobqError)}
    found.update({code: status for status, code in _FRAMEWORK_CODES.items()})
    found[UNSUPPORTED_MEDIA_TYPE] = 415
    return found


def problem(
    status: int, code: str, detail: str, *, title: str | None = None, **extra: Any
) -> JSONResponse:
    """A problem+json response."""
    body = {
        "type": TYPE_PREFIX + code,
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
        **extra,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE)


def from_error(exc: JobqError) -> JSONResponse:
    """The problem+json response for one of jobq's errors (with its headers, if any)."""
    response = problem(exc.status, exc.code, exc.detail, title=exc.title, **exc.extra)
    response.headers.update(exc.headers())  # e.g. WWW-Authenticate, Retry-After
    return response


async def _jobq_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, JobqError)
    # A service names a field by its path in the values it was given, which a route
    # takes from the request's body (FastAPI checks path and query parameters itself).
    return from_error(exc.within("body"))


def _is_json(content_type: str | None) -> bool:
    media = (content_type or "").split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = field_errors(exc.errors())
    content_type = request.headers.get("content-type")
    if any(e["loc"] == ["body"] for e in errors) and not _is_json(content_type):
        return problem(
            415,
            UNSUPPORTED_MEDIA_TYPE,
            f"the body must be JSON sent with 'Content-Type: application/json' "
            f"(got {content_type or 'no Content-Type'})",
            title="Unsupported media type",
        )
    bad_json = [e for e in exc.errors() if e["type"] == "json_invalid"]
    if bad_json:
        detail = f"the body is not valid JSON: {await _where(request, bad_json[0])}"
        return problem(400, "invalid_json", detail, title="Invalid JSON")
    fields = ", ".join(".".join(map(str, e["loc"])) for e in errors)
    return problem(
        422,
        "validation_error",
        f"invalid fields: {fields}",
        title="Validation error",
        errors=errors,
    )


async def _where(request: Request, error: dict[str, Any]) -> str:
    """The decoder's reason and where it stopped, as `json` says it: "Expecting value:
    line 3 column 14 (char 30)". FastAPI's error carries the reason (`ctx`) and the
    character (`loc`); the line and column are counted in the body, read once already."""
    reason = str((error.get("ctx") or {}).get("error") or error["msg"])
    position = error["loc"][-1] if len(error["loc"]) > 1 else None
    if not isinstance(position, int):
        return reason
    text = (await request.body()).decode("utf-8", errors="replace")
    return str(json.JSONDecodeError(reason, text, position))


@functools.lru_cache(maxsize=256)
def _template(path: str) -> re.Pattern[str]:
    """A regular expression for an OpenAPI path template (`/v1/jobs/{job_id}`)."""
    parts = re.split(r"\{[^}/]+\}", path)
    return re.compile("[^/]+".join(map(re.escape, parts)))


def _allowed_methods(request: Request, named: str) -> str:
    """The methods the router named (its first route at this path's), and every other
    route's at the same path, as the OpenAPI document lists them."""
    methods = {method.strip() for method in named.split(",") if method.strip()}
    for path, item in request.app.openapi()["paths"].items():
        if _template(path).fullmatch(request.url.path):
            methods |= {method.upper() for method in item}
    return ", ".join(sorted(methods))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(exc.__cause__, RecursionError):  # the JSON parser gave up on its depth
        detail = "the body nests arrays and objects too deeply to be parsed"
        return problem(400, "invalid_json", detail, title="Invalid JSON")
    code = _FRAMEWORK_CODES.get(exc.status_code, HTTP_ERROR)
    response = problem(exc.status_code, code, str(exc.detail))
    if exc.headers:
        response.headers.update(exc.headers)
    if exc.status_code == 405:
        response.headers["Allow"] = _allowed_methods(request, response.headers.get("Allow", ""))
    return response


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    path = cut_tokens(request.url.path)
    log.error("unhandled error on %s %s", request.method, path, exc_info=exc)
    return problem(500, "internal_error", "an unexpected error occurred; it has been logged")


def install(app: FastAPI) -> None:
    """Register the handlers on `app`."""
    app.add_exception_handler(JobqError, _jobq_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
