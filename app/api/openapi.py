"""The OpenAPI document: error responses documented as problem+json."""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from starlette.routing import BaseRoute

from app.api.problems import PROBLEM_MEDIA_TYPE
from app.api.schemas import Problem

PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
# The title the document gives an optional body's schema (FastAPI's default is the
# parameter's name; the routes' bodies were once all named `request`).
OPTIONAL_BODY_TITLE = "Request"
# Headers that come with some problem statuses.
PROBLEM_HEADERS: dict[int, dict[str, Any]] = {
    429: {
        "Retry-After": {
            "description": "Seconds to wait before trying again.",
            "schema": {"type": "integer", "minimum": 1},
        }
    },
}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: these statuses answer with a Problem."""
    return {
        status: {
            "model": Problem,
            **({"headers": PROBLEM_HEADERS[status]} if status in PROBLEM_HEADERS else {}),
        }
        for status in statuses
    }


def build(app: FastAPI, routes: Sequence[BaseRoute] | None = None) -> dict[str, Any]:
    """The app's OpenAPI schema, every 4xx/5xx as `application/problem+json`; its paths
    in the order of `routes` (the app's, by default)."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes if routes is None else routes,
    )
    _document_common_errors(schema)
    _keep_example_nulls(schema)
    for path in schema["paths"].values():
        for operation in path.values():
            for status, response in operation.get("responses", {}).items():
                if status[0] in "45":
                    if status == "422":
                        response["description"] = "Validation error"
                    response["content"] = {PROBLEM_MEDIA_TYPE: {"schema": PROBLEM_REF}}
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    app.openapi_schema = schema
    return schema


# Any request with a body may be refused as such; anything under /v1 needs the database.
_BODY_ERRORS = ("400", "413", "415", "422")
_DATABASE_ERRORS = ("503",)


def _document_common_errors(schema: dict[str, Any]) -> None:
    """Add the error answers every operation of a kind may give, for client generators."""
    for path, item in schema["paths"].items():
        for operation in item.values():
            responses = operation.setdefault("responses", {})
            statuses: tuple[str, ...] = _BODY_ERRORS if "requestBody" in operation else ()
            statuses += _DATABASE_ERRORS if path.startswith("/v1/") else ()
            for status in statuses:
                responses.setdefault(status, {"description": HTTPStatus(int(status)).phrase})


def _models(base: type[BaseModel] = BaseModel) -> list[type[BaseModel]]:
    """Every pydantic model jobq defines, whichever domain's schemas it is in."""
    found: list[type[BaseModel]] = []
    for model in base.__subclasses__():
        if model.__module__.startswith("app."):
            found.append(model)
        found.extend(_models(model))
    return found


def _keep_example_nulls(schema: dict[str, Any]) -> None:
    """Put the schemas' examples back as written: FastAPI drops their null fields."""
    components = schema.get("components", {}).get("schemas", {})
    for model in _models():
        extra = model.model_config.get("json_schema_extra")
        if model.__name__ in components and isinstance(extra, dict) and "examples" in extra:
            components[model.__name__]["examples"] = extra["examples"]
