"""A lean request handler for the hot routes, with FastAPI's own handler as its fallback.

For every request, FastAPI's handler extracts the endpoint's context for error
messages, parses the content type through `email.message`, and solves the endpoint's
parameters as a dependency tree (each parameter's source, alias and sequence shape
worked out again). On the single-job path that is a fifth of a call's CPU. A route whose
endpoint is simple gets this handler in front of FastAPI's instead; it takes the
common request (path parameters, no query string, any declared headers, a JSON body),
reads and validates it with the same fields, `json.loads` and pydantic validation as
FastAPI, and calls the endpoint. Anything else goes to FastAPI's handler, which answers
it exactly as before: a query string, another content type, an empty body for a
required one, JSON that does not parse, a value that does not validate (so every 422
and 400 is still FastAPI's own, word for word), and every request while FastAPI's
OpenTelemetry instrumentation is on (its spans for the parameters and the endpoint).

Simple means: no dependencies, no cookies, no form, no parameter models, at most one
body parameter (not embedded), and an endpoint declared to return a `Response` (so no
response model serializes its answer).
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.params import Form, Header
from fastapi.telemetry import get_telemetry_data
from pydantic import BaseModel

Handler = Callable[[Request], Coroutine[Any, Any, Response]]

# The fallback's marker: the lean handler found something only FastAPI should answer.
_FULL = object()
_JSON = "application/json"


def _returns_response(call: Callable[..., Any]) -> bool:
    try:
        annotation = inspect.signature(call, eval_str=True).return_annotation
    except (NameError, TypeError, ValueError):  # pragma: no cover - unresolvable names
        return False
    return isinstance(annotation, type) and issubclass(annotation, Response)


def _is_simple(dependant: Dependant, embed_body: bool) -> bool:
    params = [*dependant.path_params, *dependant.query_params, *dependant.header_params]
    return (
        dependant.call is not None
        and not dependant.dependencies
        and not dependant.cookie_params
        and len(dependant.body_params) <= 1
        and not (dependant.body_params and embed_body)
        and not any(isinstance(f.field_info, Form) for f in dependant.body_params)
        and not any(
            isinstance(f.field_info.annotation, type)
            and issubclass(f.field_info.annotation, BaseModel)
            for f in params
        )
        and not any(f.field_info.is_required() for f in dependant.query_params)
        and not any(f.field_info.validation_alias for f in dependant.header_params)
        and dependant.websocket_param_name is None
        and dependant.http_connection_param_name is None
        and dependant.response_param_name is None
        and dependant.background_tasks_param_name is None
        and dependant.security_scopes_param_name is None
        and _returns_response(dependant.call)
    )


def _header_key(field: Any) -> str:
    """The request header a header parameter reads (FastAPI's rule, for plain names)."""
    info = field.field_info
    alias: str = field.alias
    if isinstance(info, Header) and info.convert_underscores and alias == field.name:
        alias = alias.replace("_", "-")
    return alias.lower()


def _is_json(request: Request) -> bool:
    """Is the content type plainly JSON? Anything fancier is FastAPI's to parse."""
    value = request.headers.get("content-type")
    return value is not None and value.strip().lower() == _JSON


async def _body(request: Request) -> bytes:
    """The request's body; one that cannot be read (the client went away mid-body) gets
    FastAPI's answer to it, a 400. (FastAPI's own body size limit, which it would answer
    with a 413 here, is not configured: jobq's `BodySizeLimit` refuses large bodies
    before any route.)"""
    try:
        return await request.body()
    except HTTPException:
        raise
    except Exception as exc:
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from exc


def lean_handler(dependant: Dependant, embed_body: bool, full: Handler) -> Handler:
    """A handler for `dependant`'s common requests, `full` for the rest; `full` itself
    when the endpoint is not simple enough."""
    if not _is_simple(dependant, embed_body):
        return full
    call = dependant.call
    assert call is not None
    paths = [(f, f.alias) for f in dependant.path_params]
    headers = [(f, _header_key(f)) for f in dependant.header_params]
    defaults = list(dependant.query_params)
    body = dependant.body_params[0] if dependant.body_params else None
    request_name = dependant.request_param_name

    def default(field: Any) -> Any:
        """An absent parameter's value (FastAPI's: a copy of its default); `_FULL` when
        FastAPI must answer (it is required: a 422; or its default is validated)."""
        if field.field_info.is_required() or field.field_info.validate_default:
            return _FULL
        return copy.deepcopy(field.default)

    async def read(request: Request) -> dict[str, Any] | None:
        """The endpoint's arguments, or None when FastAPI must answer."""
        if request.scope.get("query_string"):
            return None
        values: dict[str, Any] = {}
        path_params = request.path_params
        for field, alias in paths:
            raw = path_params.get(alias)
            if raw is None:
                return None
            value, errors = field.validate(raw, values, loc=("path", alias))
            if errors:
                return None
            values[field.name] = value
        for field, key in headers:
            raw = request.headers.get(key)
            if raw is None:
                value = default(field)
            else:
                value, errors = field.validate(raw, values, loc=("header", key))
                if errors:
                    return None
            if value is _FULL:
                return None
            values[field.name] = value
        for field in defaults:
            value = default(field)
            if value is _FULL:
                return None
            values[field.name] = value
        if body is not None:
            content = await _body(request)
            if not content:
                value = default(body)
                if value is _FULL:
                    return None
            elif not _is_json(request):
                return None
            else:
                try:
                    parsed = json.loads(content)
                except Exception:  # not JSON, not UTF-8, nested too deep: FastAPI's 400s
                    return None
                value, errors = body.validate(parsed, values, loc=("body",))
                if errors:
                    return None
            values[body.name] = value
        if request_name is not None:
            values[request_name] = request
        return values

    async def handle(request: Request) -> Response:
        if get_telemetry_data() is not None:  # traced: FastAPI's spans for each step
            return await full(request)
        values = await read(request)
        if values is None:
            return await full(request)
        response: Response = await call(**values)
        return response

    return handle
