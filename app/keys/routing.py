"""`KeyedRoute`: routes whose access rule is judged before anything else of the request.

A route declares its access as a parameter, `caller: WorkCaller` or `_access: Anyone`
(the `Annotated` aliases of `app.keys.access`), which FastAPI solves as a dependency.
FastAPI reads and parses a request's body before it solves any dependency, so a caller
without the right key would learn from a 400 that its body was malformed. A router built
with `route_class=KeyedRoute` judges the rule first, in the route's handler (FastAPI's
documented extension point, `APIRoute.get_route_handler`): a refused caller gets its 401
or 403 before any 400 or 422. The dependency then finds the caller the rule already
judged (`app.keys.access` keeps the verdict in the request's scope). A route whose
endpoint is simple has its common requests read by `app.api.lean` instead of FastAPI's
handler, which still answers everything else. An admin route's answers are recorded in
the audit log (`app.keys.audit`: the rule, and why the record is written as the answer
starts).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any, get_args, get_origin

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.types import Receive, Scope, Send

from app.api.lean import lean_reader
from app.keys.access import Access
from app.keys.audit import capture, is_admin_action

Endpoint = Callable[..., Awaitable[Any]]


def _rule(annotation: Any) -> Access | None:
    """The access rule an `Annotated[..., Depends(rule)]` parameter declares, if any."""
    if get_origin(annotation) is not Annotated:
        return None
    for extra in get_args(annotation)[1:]:
        dependency = getattr(extra, "dependency", None)  # what `Depends(...)` was given
        if isinstance(dependency, Access):
            return dependency
    return None


def declared_rule(endpoint: Endpoint) -> tuple[str, Access] | None:
    """The parameter declaring `endpoint`'s one access rule, and the rule; None for none
    or several (left to FastAPI and to the route-table test, which fails for either)."""
    signature = inspect.signature(endpoint, eval_str=True)
    rules = [
        (name, rule) for name, p in signature.parameters.items() if (rule := _rule(p.annotation))
    ]
    return rules[0] if len(rules) == 1 else None


class KeyedRoute(APIRoute):
    """An `APIRoute` whose access rule is judged before its parameters and body."""

    def __init__(self, path: str, endpoint: Endpoint, **options: Any) -> None:
        declared = declared_rule(endpoint)
        self.first_rule = declared[1] if declared else None
        self.lean = lean_reader(endpoint, path, declared[0] if declared else None)
        super().__init__(path, endpoint, **options)
        # The action an admin route's audit entries name; None: the route is not audited.
        audited = is_admin_action(self.methods or (), self.first_rule)
        self.audited_action = (self.operation_id or self.name) if audited else None

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """An admin route's requests go through the audit capture (Starlette's
        `Route.handle`, extended); every other route's are handled as they were."""
        if self.audited_action is None:
            await super().handle(scope, receive, send)
        else:
            await capture(self.audited_action, scope, receive, send, handle=super().handle)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        rule, lean, endpoint = self.first_rule, self.lean, self.endpoint
        if rule is None:
            return handler

        async def checked(request: Request) -> Response:
            verdict = await rule(request)  # raises for a refused caller
            if lean is not None and (arguments := await lean(request, verdict)) is not None:
                response: Response = await endpoint(**arguments)
                return response
            return await handler(request)

        return checked
