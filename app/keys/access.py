"""Who may call what. Every route declares its access once, as a parameter:

    async def healthz(_access: Anyone)                             anyone
    async def readyz(_access: LocalOrAnyKey, ...)                  loopback peers, or any key
    async def enqueue_job(caller: EnqueueCaller, ...)              a key with `enqueue`

(`EnqueueCaller`, `WorkCaller`, `ReadCaller`, `AdminCaller`, `Anyone`, `LocalOrAnyKey`
are the `Annotated` aliases below.) FastAPI runs the rule as a dependency; the routers'
`KeyedRoute` judges it first, before the route's parameters and body are read
(`app.keys.routing`), and the dependency then reuses the verdict kept in the scope.
`access_of(route)` reads the declaration back: the route-table test fails for any route
that declares none, and `document_keys` puts the security scheme in the OpenAPI
document for every route that takes a key, so generated clients send the header.

FastAPI reads and parses a request's body before it runs a route's dependencies, so
`KeyGate` checks the key of every request that carries a body first, and refuses one
without a valid key before reading a byte of it (every route that takes a body needs a
key). The route's rule then reuses that verdict.

The rules read the `Authorization` header themselves rather than through FastAPI's
`HTTPBearer` dependency, which would cost every request a dependency level more.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from starlette.routing import Mount

from app.core.errors import Unauthorized
from app.keys.authenticator import Authenticator, is_loopback
from app.keys.caller import Caller
from app.keys.scopes import Scope

Need = Literal["public", "probe", "enqueue", "work", "read", "admin"]
VERDICT = "jobq.caller"  # the request scope's entry for the key's verdict (KeyGate's or a rule's)

# The OpenAPI security scheme of every route that takes a key (see `document_keys`).
bearer = HTTPBearer(
    auto_error=False,
    scheme_name="apiKey",
    bearerFormat="jobq_<lookup id>_<secret>",
    description="An API key (`jobq keys create`), sent as `Authorization: Bearer <key>`.",
)


def bearer_token(authorization: str | None) -> str | None:
    """The key an `Authorization: Bearer <key>` header sends; None for any other."""
    scheme, token = get_authorization_scheme_param(authorization)
    return token if token and scheme.lower() == "bearer" else None


def authenticator(app: Any) -> Authenticator | None:
    """The authenticator of the app's `Services` (`app.services`); None before its
    lifespan built them."""
    services = getattr(app.state, "services", None)
    auth: Authenticator | None = services.auth if services is not None else None
    return auth


async def _verdict(request: Request) -> Caller:
    """The caller, as KeyGate found it or from the key sent; `Unauthorized` if refused."""
    verdict = request.scope.get(VERDICT)
    if verdict is None:
        auth = authenticator(request.app)
        assert auth is not None, "the app's lifespan builds the authenticator"
        try:
            verdict = await auth.authenticate(bearer_token(request.headers.get("authorization")))
        except Unauthorized as exc:
            verdict = exc
        request.scope[VERDICT] = verdict  # the route's dependency judges the same key again
    if isinstance(verdict, Unauthorized):
        raise verdict
    assert isinstance(verdict, Caller)
    return verdict


class Access:
    """What a route asks of its caller (`need`): run by FastAPI as a dependency, and
    by `KeyedRoute` ahead of the route's parameters."""

    need: Need

    async def __call__(self, request: Request) -> Caller | None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.need!r})"


class Public(Access):
    """Anyone, with or without a key (the key is not even looked at)."""

    need = "public"

    async def __call__(self, request: Request) -> None:
        return None


class Probe(Access):
    """A peer on this machine (a local health checker), or any valid key."""

    need = "probe"

    async def __call__(self, request: Request) -> None:
        if not is_loopback(request.client.host if request.client else None):
            await _verdict(request)


class Requires(Access):
    """A key with this scope (or `admin`); the route gets the `Caller` for queue checks."""

    def __init__(self, scope: Scope) -> None:
        self.need = scope
        self.scope: Scope = scope

    async def __call__(self, request: Request) -> Caller:
        caller = await _verdict(request)
        caller.require(self.scope)
        return caller


PUBLIC = Public()
PROBE = Probe()
ENQUEUE = Requires("enqueue")
WORK = Requires("work")
READ = Requires("read")
ADMIN = Requires("admin")


def served_routes(app: FastAPI) -> list[Any]:
    """Every route `app` serves, routers unfolded: each has `path` and `methods`, and a
    `dependant` when FastAPI builds it (not the OpenAPI document and its viewers)."""
    found: list[Any] = []
    pending: list[Any] = list(reversed(app.routes))
    while pending:
        route = pending.pop()
        unfold = getattr(route, "effective_route_contexts", None)  # FastAPI ≥ 0.13x: lazy
        if unfold is not None:
            pending.extend(reversed(list(unfold())))
        else:
            found.append(route)
    return found


def access_of(route: APIRoute | Any) -> list[Access]:
    """The access rules `route` declares (exactly one, for a well-declared route)."""
    found: list[Access] = []
    dependant = getattr(route, "dependant", None)
    pending = [dependant] if dependant is not None else []
    while pending:
        dependant = pending.pop()
        for dependency in dependant.dependencies:
            if isinstance(dependency.call, Access):
                found.append(dependency.call)
            pending.append(dependency)
    return found


def framework_paths(app: FastAPI) -> set[str]:
    """FastAPI's own routes (the OpenAPI document and its viewers): public, no secrets."""
    paths = {app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url}
    return {path for path in paths if path}


# The caller of a route that needs a key with this scope.
EnqueueCaller = Annotated[Caller, Depends(ENQUEUE)]
WorkCaller = Annotated[Caller, Depends(WORK)]
ReadCaller = Annotated[Caller, Depends(READ)]
AdminCaller = Annotated[Caller, Depends(ADMIN)]
# A route open to anyone, or to loopback peers and any key: it gets no caller.
Anyone = Annotated[None, Depends(PUBLIC)]
LocalOrAnyKey = Annotated[None, Depends(PROBE)]


def declared_access(app: FastAPI) -> dict[tuple[str, str], str | None]:
    """(method, path) → what the route needs: a scope, `probe` or `public`; None when it
    declares no rule (a test fails for any)."""
    framework = framework_paths(app)
    table: dict[tuple[str, str], str | None] = {}
    for route in served_routes(app):
        if isinstance(route, Mount):  # static files (the dashboard's): public, no secrets
            table[("GET", f"{route.path}/{{path}}")] = "public"
            continue
        rules = access_of(route)
        if getattr(route, "dependant", None) is None and route.path in framework:
            need: str | None = "public"  # FastAPI's OpenAPI document and its viewers
        else:
            need = rules[0].need if len(rules) == 1 else None
        for method in sorted(set(route.methods) - {"HEAD"}):
            table[(method, route.path)] = need
    return table


def document_keys(app: FastAPI, schema: dict[str, Any]) -> None:
    """Put the API key's security scheme in `app`'s OpenAPI `schema`, and require it on
    every operation whose route takes a key (all but the public ones; optional on the
    probes, which loopback peers call without one)."""
    table = declared_access(app)
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            need = table.get((method.upper(), path), "public")
            if need == "probe":  # a loopback peer needs no key: the key is optional
                operation["security"] = [{}, {bearer.scheme_name: []}]
            elif need != "public":
                operation["security"] = [{bearer.scheme_name: []}]
    schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
    schemes[bearer.scheme_name] = jsonable_encoder(bearer.model, by_alias=True, exclude_none=True)


_NEED_LABELS = {
    "public": "none",
    "probe": "loopback peer, or any key",
    "enqueue": "`enqueue`",
    "work": "`work`",
    "read": "`read`",
    "admin": "`admin` only",
}


def scope_table(app: FastAPI) -> str:
    """The Markdown table of what each route needs, from the routes' own declarations."""
    rows = ["| Access | Routes |", "| --- | --- |"]
    table = declared_access(app)
    for need, label in _NEED_LABELS.items():
        routes = sorted(
            (path, method) for (method, path), declared in table.items() if declared == need
        )
        if routes:
            listed = ", ".join(f"`{method} {path}`" for path, method in routes)
            rows.append(f"| {label} | {listed} |")
    return "\n".join(rows) + "\n"
