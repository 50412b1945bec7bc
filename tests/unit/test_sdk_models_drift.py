"""The Python SDK's models are held to `openapi/openapi.json`, field by field: each model
that mirrors a schema of the document has its properties under the same names (or the
renames listed here), each typed as the document types it, nullable where it is, with a
default where the document may leave it out; and `from_json` reads every field of an
answer the document allows. The SDK is written by hand (it depends on httpx alone and
parses into frozen dataclasses); this test is what keeps it from drifting."""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest

from jobq_client import _admin, _models

SPEC = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
SCHEMAS: dict[str, Any] = json.loads(SPEC.read_text())["components"]["schemas"]
SDK_MODULES = (_models, _admin)


@dataclasses.dataclass(frozen=True)
class Mirror:
    """An SDK model and the schema it mirrors, with what it does differently on purpose."""

    sdk: type
    schema: str
    renamed: dict[str, str] = dataclasses.field(default_factory=dict)  # SDK field: property
    sdk_only: frozenset[str] = frozenset()  # fields the document has no property for
    left_out: frozenset[str] = frozenset()  # properties the SDK does not name
    typed: dict[str, Any] = dataclasses.field(default_factory=dict)  # an object, parsed so
    request: bool = False  # a body the SDK sends: None, or a default, means "not sent"

    @property
    def properties(self) -> dict[str, Any]:
        found: dict[str, Any] = SCHEMAS[self.schema]["properties"]
        return found

    @property
    def required(self) -> set[str]:
        return set(SCHEMAS[self.schema].get("required", []))


M = _models
# A JSON object of an error (`last_error`, an attempt's `error`) is parsed into ErrorInfo.
ERROR = {"last_error": M.ErrorInfo, "error": M.ErrorInfo}
# A job's `unique` object is parsed into Uniqueness.
JOB = {**ERROR, "unique": M.Uniqueness, "trace": M.TraceContext}
MIRRORS = [
    Mirror(M.Progress, "ProgressOut"),
    Mirror(M.ErrorInfo, "ErrorIn"),  # what a worker sends is what the job's answers show
    Mirror(M.Attempt, "AttemptOut", typed=ERROR),
    Mirror(M.JobRecord, "JobOut", typed=JOB),
    Mirror(M.Uniqueness, "UniqueOut"),
    Mirror(M.TraceContext, "TraceOut"),
    # Answered in brief to a key without `read`; `job` is the whole EnqueuedJob otherwise.
    Mirror(M.Enqueued, "DeduplicatedBrief", sdk_only=frozenset({"job"})),
    Mirror(M.BatchItem, "BatchItemOut"),
    Mirror(M.JobsPage, "JobsPage"),
    Mirror(M.Parent, "ParentOut"),
    Mirror(M.Lease, "LeaseOut"),
    Mirror(M.Related, "DependencyOut"),
    Mirror(M.Dependencies, "DependenciesOut"),
    Mirror(M.Reason, "ReasonOut"),
    Mirror(M.Explanation, "ExplainOut"),
    Mirror(M.Heartbeat, "HeartbeatOut"),
    Mirror(M.AckResult, "AckResult"),
    Mirror(M.Ref, "Ref", renamed={"index": "ref"}, request=True),
    Mirror(M.JobSpec, "JobIn", request=True, typed={"unique": M.Unique, "trace": M.TraceContext}),
    Mirror(M.TraceContext, "TraceIn", request=True),
    Mirror(M.Unique, "UniqueIn", request=True),
    # `outcome` is the class itself.
    Mirror(M.Complete, "AckComplete", left_out=frozenset({"outcome"}), request=True),
    Mirror(_admin.ScheduleRun, "ScheduleRunOut"),
    Mirror(_admin.Schedule, "ScheduleOut"),
    Mirror(_admin.WorkerInfo, "WorkerOut"),
    Mirror(_admin.RateLimit, "RateLimit"),
    Mirror(_admin.Aging, "Aging"),
    Mirror(_admin.PushTargetInfo, "PushTargetOut"),
    Mirror(_admin.PushBreaker, "app__push__schemas__BreakerOut"),
    Mirror(
        _admin.PushHealth,
        "PushHealthOut",
        typed={"target": _admin.PushTargetInfo, "breaker": _admin.PushBreaker},
    ),
    Mirror(_admin.PushTarget, "PushTargetIn", request=True),
    Mirror(_admin.QueueSettings, "QueueSettingsOut"),
    # The figures most callers want, and the whole answer in `raw`.
    Mirror(
        _admin.QueueStats,
        "QueueStats",
        sdk_only=frozenset({"raw"}),
        left_out=frozenset({"paused_at", "last_minute", "last_hour", "running_jobs"}),
        typed={"counts": dict[str, int], "limits": dict[str, Any]},
    ),
    # The database's health as sent: the CLI prints it, no caller reads it field by field.
    Mirror(_admin.Stats, "QueuesStats", typed={"database": dict[str, Any]}),
    Mirror(_admin.AuditEntry, "AuditEntryOut"),
    Mirror(_admin.AuditPage, "AuditPage"),
]
# SDK dataclasses that mirror no schema, and why.
NOT_MIRRORS = {
    "Fail": "AckFail with its `error` object flattened into error_type, message, details",
}
# The SDK class a schema's `$ref` stands for.
BY_SCHEMA = {m.schema: m.sdk for m in MIRRORS if not m.request} | {"Ref": M.Ref}


def _expected(schema: dict[str, Any]) -> Any:
    """The Python annotation for a JSON schema, as the SDK writes it."""
    if "$ref" in schema:
        return BY_SCHEMA[schema["$ref"].rsplit("/", 1)[-1]]
    if "anyOf" in schema:
        return Union[tuple(_expected(part) for part in schema["anyOf"])]  # noqa: UP007
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    if "const" in schema:
        return Literal[schema["const"]]
    kind = schema.get("type")
    if kind == "string":
        return datetime if schema.get("format") == "date-time" else str
    if kind == "array":
        return list[_expected(schema["items"])]  # type: ignore[misc]
    if kind == "object":
        values = schema.get("additionalProperties")
        return dict[str, _expected(values) if isinstance(values, dict) else Any]  # type: ignore[misc]
    simple = {"integer": int, "number": float, "boolean": bool, "null": type(None), None: Any}
    return simple[kind]


def _shape(annotation: Any) -> Any:
    """A comparable form of an annotation: unions as sets, any sequence as a list."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        members: set[Any] = set()
        for arg in args:
            shape = _shape(arg)
            members |= shape[1] if isinstance(shape, tuple) and shape[0] == "|" else {shape}
        if Any in members:  # None or anything: anything
            return Any
        return ("|", frozenset(members)) if len(members) > 1 else members.pop()
    if origin is Literal:
        return ("Literal", frozenset(args))
    if origin in (list, Sequence):
        return ("list", _shape(args[0]))
    if origin is dict:
        return ("dict", _shape(args[1]))
    if annotation is dict:
        return ("dict", Any)
    return annotation


def _nullable(annotation: Any) -> bool:
    return type(None) in get_args(annotation)


def _null_allowed(schema: dict[str, Any]) -> bool:
    return any(part.get("type") == "null" for part in schema.get("anyOf", []))


def _has_default(field: dataclasses.Field[Any]) -> bool:
    return (
        field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    )


def _drift(mirror: Mirror) -> list[str]:
    """What differs between `mirror`'s SDK model and its schema, one line each."""
    name = f"{mirror.sdk.__name__} ({mirror.schema})"
    hints = get_type_hints(mirror.sdk)
    fields = {f.name: f for f in dataclasses.fields(mirror.sdk)}
    by_property = {mirror.renamed.get(f, f): f for f in fields if f not in mirror.sdk_only}
    found = [
        f"{name}: the document has `{p}`, the SDK does not"
        for p in mirror.properties
        if p not in by_property and p not in mirror.left_out
    ]
    found += [
        f"{name}: the SDK has `{fields_name}`, the document does not"
        for prop, fields_name in by_property.items()
        if prop not in mirror.properties
    ]
    for prop, attr in by_property.items():
        if prop not in mirror.properties:
            continue
        schema = mirror.properties[prop]
        optional = prop not in mirror.required
        if attr in mirror.typed:
            typed = mirror.typed[attr]
            expected = typed | None if _null_allowed(schema) else typed
        else:
            expected = _expected(schema)
        if mirror.request and optional:
            expected = expected | None  # None: not sent
        if _shape(hints[attr]) != _shape(expected):
            found.append(
                f"{name}: `{attr}` is {hints[attr]}, the document says {expected} "
                f"({json.dumps(schema)})"
            )
        default = _has_default(fields[attr])
        if mirror.request and default != optional:
            rule = "may leave it out" if optional else "requires it"
            found.append(f"{name}: the document {rule}, `{attr}` has {'no ' * optional}default")
        if not mirror.request and optional and not default and not _nullable(hints[attr]):
            found.append(f"{name}: the document may leave `{prop}` out, `{attr}` needs it")
    return found


def _sample(schema: dict[str, Any], whole: bool) -> Any:
    """A value the document allows for `schema`: every property if `whole`, else only the
    required ones; a nullable value is never null."""
    if "$ref" in schema:
        return _sample(SCHEMAS[schema["$ref"].rsplit("/", 1)[-1]], whole)
    if "anyOf" in schema:
        return _sample(next(s for s in schema["anyOf"] if s.get("type") != "null"), whole)
    if "enum" in schema or "const" in schema:
        return schema.get("enum", [schema.get("const")])[-1]
    kind = schema.get("type")
    if kind == "object" and "properties" in schema:
        required = set(schema.get("required", []))
        return {
            name: _sample(value, whole)
            for name, value in schema["properties"].items()
            if whole or name in required
        }
    if kind == "string" and schema.get("format") == "date-time":
        return "2026-11-22T04:08:33.280955Z"
    samples = {"integer": 7, "number": 2.5, "boolean": True, "string": "s", None: {"any": [1]}}
    if kind == "array":
        return [_sample(schema["items"], whole)]
    if kind == "object":
        return {"type": "E", "message": "m"}  # also an error's shape
    return samples[kind]


def _holds(value: Any, annotation: Any) -> bool:
    """Whether `value` is of type `annotation` (the parts of typing the SDK uses)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is Any:
        return True
    if origin in (Union, types.UnionType):
        return any(_holds(value, arg) for arg in args)
    if origin is Literal:
        return value in args
    if origin is list:
        return isinstance(value, list) and all(_holds(v, args[0]) for v in value)
    if origin is dict or annotation is dict:
        return isinstance(value, dict)
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, annotation)


def test_every_sdk_model_says_which_schema_it_mirrors() -> None:
    named = {m.sdk.__name__ for m in MIRRORS} | set(NOT_MIRRORS)
    models = {
        name
        for module in SDK_MODULES
        for name, value in vars(module).items()
        if dataclasses.is_dataclass(value) and value.__module__ == module.__name__
    }
    assert models <= named, f"add {sorted(models - named)} to MIRRORS or NOT_MIRRORS"


@pytest.mark.parametrize("mirror", MIRRORS, ids=lambda m: m.sdk.__name__)
def test_the_sdk_model_has_the_schemas_fields_and_types(mirror: Mirror) -> None:
    assert mirror.schema in SCHEMAS, f"{mirror.schema} is not in the document"
    problems = _drift(mirror)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "mirror", [m for m in MIRRORS if hasattr(m.sdk, "from_json")], ids=lambda m: m.sdk.__name__
)
def test_the_sdk_model_reads_every_field_of_an_answer(mirror: Mirror) -> None:
    whole = _sample(SCHEMAS[mirror.schema], whole=True)
    parsed = mirror.sdk.from_json(whole)  # type: ignore[attr-defined]
    hints = get_type_hints(mirror.sdk)
    for field in dataclasses.fields(mirror.sdk):
        if field.name in mirror.sdk_only:
            continue
        name, value = f"{mirror.sdk.__name__}.{field.name}", getattr(parsed, field.name)
        sent = whole[mirror.renamed.get(field.name, field.name)]
        if isinstance(value, datetime):
            sent = datetime.fromisoformat(sent)
        if isinstance(sent, bool | int | float | str | datetime):  # not its default
            assert value == sent, f"{name} is {value!r}, the answer says {sent!r}"
        assert value is not None, f"{name}: from_json left it unread"
        assert _holds(value, hints[field.name]), f"{name} is {value!r}"
    mirror.sdk.from_json(_sample(SCHEMAS[mirror.schema], whole=False))  # type: ignore[attr-defined]


def test_a_property_added_to_a_schema_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    job = SCHEMAS["JobOut"]
    shiny = {**job["properties"], "shiny": {"type": "integer"}}
    monkeypatch.setitem(SCHEMAS, "JobOut", {**job, "properties": shiny})
    (record,) = [m for m in MIRRORS if m.sdk is M.JobRecord]
    assert _drift(record) == ["JobRecord (JobOut): the document has `shiny`, the SDK does not"]
