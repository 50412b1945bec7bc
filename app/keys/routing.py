"""`KeyedRoute`: routes that run their access rule themselves, ahead of FastAPI.

A route declares its access as a parameter, `caller: WorkCaller` or `_access: Anyone`
(the `Annotated` aliases of `app.keys.access`). FastAPI would solve it as a dependency,
a level of its own on every request: 5.5 % of a single-job call's instructions. A router
built with `route_class=KeyedRoute` instead takes that parameter out of the signature
FastAPI reads, runs the rule before FastAPI reads the request's parameters and body (as
the dependency ran before any of them was validated), and passes the endpoint the
rule's answer under the parameter's name. A route whose router lacks this class still
has its rule run, as a dependency.

Its handler is also `app.api.lean`'s where the endpoint is simple: the common request
skips FastAPI's per-request parameter solving, the rest goes through FastAPI as before.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any, get_args, get_origin

from fastapi import Request, Response
from fastapi.params import Depends
from fastapi.routing import APIRoute

from app.api.lean import lean_handler
from app.keys.access import Access

GRANTED = "jobq.granted"  # the request scope's entry for the rule's answer
_REQUEST = "_keyed_request"  # the Request parameter added where the endpoint takes none

Endpoint = Callable[..., Awaitable[Any]]


def _rule(annotation: Any) -> Access | None:
    """The access rule an `Annotated[..., Depends(rule)]` parameter declares, if any."""
    if get_origin(annotation) is not Annotated:
        return None
    for extra in get_args(annotation)[1:]:
        if isinstance(extra, Depends) and isinstance(extra.dependency, Access):
            return extra.dependency
    return None


def _without_rule(endpoint: Endpoint) -> tuple[Access | None, Endpoint]:
    """The endpoint's access rule, and the endpoint as FastAPI should see it: without
    the rule's parameter, which it gets from the request's scope."""
    signature = inspect.signature(endpoint, eval_str=True)
    declared = [(n, r) for n, p in signature.parameters.items() if (r := _rule(p.annotation))]
    if len(declared) != 1 or not inspect.iscoroutinefunction(endpoint):
        return None, endpoint  # left to FastAPI (and the route-table test)
    ((name, rule),) = declared
    params = [p for n, p in signature.parameters.items() if n != name]
    own = next((p.name for p in params if p.annotation is Request), None)
    if own is None:
        params.append(
            inspect.Parameter(_REQUEST, inspect.Parameter.KEYWORD_ONLY, annotation=Request)
        )

    async def with_access(**values: Any) -> Any:
        request = values[own] if own is not None else values.pop(_REQUEST)
        return await endpoint(**values, **{name: request.scope[GRANTED]})

    for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(with_access, attribute, getattr(endpoint, attribute))
    with_access.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return rule, with_access


class KeyedRoute(APIRoute):
    """An `APIRoute` whose access rule runs first, outside FastAPI's dependencies."""

    def __init__(self, path: str, endpoint: Endpoint, **options: Any) -> None:
        self.access_rule, endpoint = _without_rule(endpoint)
        super().__init__(path, endpoint, **options)

    lean: bool  # its common requests skip FastAPI's handler (`app.api.lean`)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        full = super().get_route_handler()
        handler = lean_handler(self.dependant, self._embed_body_fields, full)
        self.lean = handler is not full
        rule = self.access_rule
        if rule is None:
            return handler

        async def checked(request: Request) -> Response:
            request.scope[GRANTED] = await rule(request)
            return await handler(request)

        return checked
