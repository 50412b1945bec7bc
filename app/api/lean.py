"""A lean request handler for simple routes, with FastAPI's own handler as its fallback.

For every request, FastAPI's handler sets up its telemetry context, parses the content
type through `email.message` and solves the endpoint's parameters as a dependency tree,
its access rule again among them. On the single-job path that is a large share of a
call's CPU (docs/performance/service.md). A route whose endpoint is simple gets this
handler in front of FastAPI's: it reads the common request from the endpoint's own
signature, with the same pydantic validation of each value FastAPI runs (`json.loads`,
then the parameter's annotation), and calls the endpoint. Anything else goes to
FastAPI's handler, which answers exactly as before: a query string, a content type
other than plain `application/json`, a missing value without a default, JSON that does
not parse, a value that does not validate (so every 400 and 422 is FastAPI's own, word
for word), dependency overrides, and every request while FastAPI's telemetry is on.

Simple means: each parameter is the route's access rule, the `Request`, a path
parameter, a header (`Header()`, no alias) or the one JSON body (a model, or `Body()`
not embedded); and the endpoint is declared to return a `Response`, so no response
model serializes its answer. Only public API: `inspect`, FastAPI's parameter classes
as its documentation declares them, pydantic's `TypeAdapter`.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from fastapi import Request, Response, params
from fastapi.telemetry import get_telemetry_data
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic.warnings import UnsupportedFieldAttributeWarning

Endpoint = Callable[..., Awaitable[Any]]
# The arguments for the endpoint, or None: FastAPI's handler must answer.
Reader = Callable[[Request, Any], Awaitable[dict[str, Any] | None]]

_JSON = "application/json"
_PATH_PARAM = re.compile(r"{(\w+)(?::\w+)?}")
_MISSING = object()


@dataclass(frozen=True)
class _Value:
    """One parameter read from the request: where, under which key, validated how."""

    name: str
    key: str
    adapter: TypeAdapter[Any]
    default: Any  # _MISSING: required


def _adapter(annotation: Any) -> TypeAdapter[Any]:
    """A validator of `annotation` with its `Path()`/`Header()`/`Body()` constraints, as
    FastAPI builds one (the fields' own attributes are no validation here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFieldAttributeWarning)
        return TypeAdapter(annotation)


def _parts(annotation: Any) -> tuple[Any, list[Any]]:
    if get_origin(annotation) is Annotated:
        base, *metadata = get_args(annotation)
        return base, metadata
    return annotation, []


def _is_model(base: Any) -> bool:
    candidates = [base, *get_args(base)]  # a model, or `Model | None`
    return any(isinstance(c, type) and issubclass(c, BaseModel) for c in candidates)


def _returns_response(signature: inspect.Signature) -> bool:
    annotation = signature.return_annotation
    return isinstance(annotation, type) and issubclass(annotation, Response)


def lean_reader(endpoint: Endpoint, path: str, rule_name: str | None) -> Reader | None:
    """A reader of `endpoint`'s arguments from common requests; None when the endpoint is
    not simple (FastAPI's handler then answers every request)."""
    try:
        signature = inspect.signature(endpoint, eval_str=True)
    except (NameError, TypeError, ValueError):  # pragma: no cover - unresolvable names
        return None
    if not _returns_response(signature):
        return None
    path_names = set(_PATH_PARAM.findall(path))
    request_name: str | None = None
    paths: list[_Value] = []
    headers: list[_Value] = []
    body: _Value | None = None
    for name, parameter in signature.parameters.items():
        if parameter.kind not in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
            return None
        if name == rule_name:
            continue
        annotation = parameter.annotation
        base, metadata = _parts(annotation)
        infos = [m for m in metadata if isinstance(m, FieldInfo)]
        default = _MISSING if parameter.default is parameter.empty else parameter.default
        if isinstance(base, type) and issubclass(base, Request) and not metadata:
            request_name = name
        elif name in path_names and all(isinstance(i, params.Path) for i in infos):
            paths.append(_Value(name, name, _adapter(annotation), _MISSING))
        elif len(infos) == 1 and isinstance(infos[0], params.Header):
            info = infos[0]
            if info.alias is not None or not info.convert_underscores:
                return None
            key = name.replace("_", "-")
            headers.append(_Value(name, key, _adapter(annotation), default))
        elif (
            body is None
            and (not infos or (len(infos) == 1 and isinstance(infos[0], params.Body)))
            and all(not getattr(i, "embed", False) for i in infos)
            and (infos or _is_model(base))
        ):
            body = _Value(name, name, _adapter(annotation), default)
        else:  # a query parameter, a dependency, a form, a cookie...
            return None
    if path_names != {v.name for v in paths}:
        return None
    return _reader(paths, headers, body, request_name, rule_name)


def _valid(value: _Value, raw: Any) -> Any:
    """`raw` validated as FastAPI validates it; `_MISSING` when it does not validate."""
    try:
        return value.adapter.validate_python(raw, from_attributes=True)
    except ValidationError:
        return _MISSING


def _reader(
    paths: list[_Value],
    headers: list[_Value],
    body: _Value | None,
    request_name: str | None,
    rule_name: str | None,
) -> Reader:
    async def read(request: Request, verdict: Any) -> dict[str, Any] | None:
        if (
            request.scope.get("query_string")
            or get_telemetry_data() is not None  # traced: FastAPI's spans for each step
            or getattr(request.app, "dependency_overrides", None)
        ):
            return None
        values: dict[str, Any] = {}
        path_params = request.path_params
        for value in paths:
            raw = path_params.get(value.key)
            valid = _MISSING if raw is None else _valid(value, raw)
            if valid is _MISSING:
                return None
            values[value.name] = valid
        for value in headers:
            raw = request.headers.get(value.key)
            if raw is None:
                if value.default is _MISSING:
                    return None
                valid = copy.deepcopy(value.default)
            else:
                valid = _valid(value, raw)
                if valid is _MISSING:
                    return None
            values[value.name] = valid
        if body is not None:
            try:
                content = await request.body()
            except Exception:  # the client went away, or FastAPI's own size limit
                return None
            if not content:
                if body.default is _MISSING:
                    return None
                valid = copy.deepcopy(body.default)
            else:
                content_type = request.headers.get("content-type")
                if content_type is None or content_type.strip().lower() != _JSON:
                    return None
                try:
                    parsed = json.loads(content)
                except (ValueError, RecursionError):  # not JSON, not UTF-8, too deep
                    return None
                valid = _valid(body, parsed)
                if valid is _MISSING:
                    return None
            values[body.name] = valid
        if request_name is not None:
            values[request_name] = request
        if rule_name is not None:
            values[rule_name] = verdict
        return values

    return read
