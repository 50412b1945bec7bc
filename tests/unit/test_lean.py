"""`app.api.lean`: which requests the lean handler answers, and which go to FastAPI's."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from fastapi import Body, Depends, Header, Path, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field

from app.api.lean import lean_handler


class Item(BaseModel):
    name: str = Field(max_length=5)
    size: int = 1


async def simple(
    item_id: Annotated[int, Path(ge=1)],
    item: Item,
    request: Request,
    trace_id: Annotated[str | None, Header(max_length=8)] = None,
) -> Response:
    return Response(json.dumps([item_id, item.model_dump(), trace_id, request.method]))


async def required_header(
    item_id: Annotated[int, Path(ge=1)], item: Item, trace_id: Annotated[str, Header()]
) -> Response:
    return Response(json.dumps([item_id, trace_id]))


async def optional_body(
    item_id: Annotated[int, Path(ge=1)], item: Annotated[Item | None, Body()] = None
) -> Response:
    return Response(json.dumps([item_id, None if item is None else item.model_dump()]))


def _request(
    path: str, body: bytes, *, query: bytes = b"", content_type: bytes | None = b"application/json"
) -> Request:
    headers = [(b"content-type", content_type)] if content_type is not None else []
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "query_string": query,
        "headers": headers,
        "path_params": {"item_id": path.rsplit("/", 1)[1]},
    }
    sent = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return sent.pop()

    return Request(scope, receive)


class Full:
    """FastAPI's handler, as the lean one sees it: counts the requests handed to it."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, request: Request) -> Response:
        self.calls += 1
        return Response(b"full")


async def _answer(endpoint: Any, request: Request) -> tuple[bytes, int]:
    full = Full()
    route = APIRoute("/items/{item_id}", endpoint, methods=["POST"])
    handler = lean_handler(route.dependant, route._embed_body_fields, full)
    assert handler is not full
    response = await handler(request)
    return bytes(response.body), full.calls


async def test_the_common_request_is_answered_without_fastapi() -> None:
    body, fallbacks = await _answer(simple, _request("/items/7", b'{"name": "a"}'))
    assert json.loads(body) == [7, {"name": "a", "size": 1}, None, "POST"]
    assert fallbacks == 0


async def test_declared_headers_are_validated_as_fastapi_does() -> None:
    request = _request("/items/7", b'{"name": "a", "size": "2"}')
    request.scope["headers"].append((b"trace-id", b"abc"))
    body, fallbacks = await _answer(simple, request)
    assert json.loads(body) == [7, {"name": "a", "size": 2}, "abc", "POST"]
    assert fallbacks == 0


async def test_an_optional_body_may_be_empty() -> None:
    body, fallbacks = await _answer(optional_body, _request("/items/3", b"", content_type=None))
    assert json.loads(body) == [3, None]
    assert fallbacks == 0


@pytest.mark.parametrize(
    ("path", "content", "extra"),
    [
        ("/items/7", b'{"name": "a"}', {"query": b"x=1"}),  # a query string
        ("/items/7", b'{"name": "a"}', {"content_type": b"application/json; charset=utf-8"}),
        ("/items/7", b'{"name": "a"}', {"content_type": b"text/plain"}),
        ("/items/7", b'{"name": "a"}', {"content_type": None}),
        ("/items/7", b"", {}),  # a required body missing
        ("/items/7", b'{"name": "a",}', {}),  # not JSON
        ("/items/7", b"\xff", {}),  # not UTF-8
        ("/items/7", b"[" * 100_000 + b"]" * 100_000, {}),  # nested too deep to parse
        ("/items/7", b'{"name": "toolong"}', {}),  # a value that does not validate
        ("/items/0", b'{"name": "a"}', {}),  # a path parameter that does not validate
        ("/items/x", b'{"name": "a"}', {}),
    ],
)
async def test_anything_else_goes_to_fastapi(path: str, content: bytes, extra: Any) -> None:
    body, fallbacks = await _answer(simple, _request(path, content, **extra))
    assert (body, fallbacks) == (b"full", 1)


async def test_an_invalid_header_goes_to_fastapi() -> None:
    request = _request("/items/7", b'{"name": "a"}')
    request.scope["headers"].append((b"trace-id", b"much-too-long"))
    assert await _answer(simple, request) == (b"full", 1)


async def test_a_required_header_missing_goes_to_fastapi() -> None:
    request = _request("/items/7", b'{"name": "a"}')
    assert await _answer(required_header, request) == (b"full", 1)
    request = _request("/items/7", b'{"name": "a"}')
    request.scope["headers"].append((b"trace-id", b"t"))
    body, fallbacks = await _answer(required_header, request)
    assert (json.loads(body), fallbacks) == ([7, "t"], 0)


async def _with_dependency(item: Item, extra: Annotated[int, Depends(lambda: 1)]) -> Response:
    return Response(b"")


async def _answering_a_dict(item: Item) -> dict[str, Any]:
    return {}


async def _with_required_query(item: Item, page: int) -> Response:
    return Response(b"")


@pytest.mark.parametrize("endpoint", [_with_dependency, _answering_a_dict, _with_required_query])
def test_endpoints_that_are_not_simple_keep_fastapis_handler(endpoint: Any) -> None:
    full = Full()
    route = APIRoute("/items", endpoint, methods=["POST"])
    assert lean_handler(route.dependant, route._embed_body_fields, full) is full
