"""The OpenAPI document: error responses documented as problem+json."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.api.problems import PROBLEM_MEDIA_TYPE
from app.schemas import Problem

PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: these statuses answer with a Problem."""
    return {status: {"model": Problem} for status in statuses}


def build(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI schema, every 4xx/5xx as `application/problem+json`."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
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
