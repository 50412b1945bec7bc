"""How create_app wires FastAPI: the order routes are tried in, and FastAPI's own
OpenTelemetry instrumentation, only when `JOBQ_OPENTELEMETRY` asks for it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from opentelemetry import trace
from starlette.routing import BaseRoute, Match, Route

from tests.helpers import enqueue


def _example_path(route: Route) -> str:
    return re.sub(r"\{[^}]+\}", "7", route.path)


def test_each_route_answers_its_own_method_and_path(
    app_factory: Callable[..., FastAPI],
) -> None:
    # The workers' and producers' routes are tried first (main._per_job_first): that
    # is only harmless while no route can take another's requests.
    app = app_factory()
    routes: list[BaseRoute] = app.router.routes
    checked = 0
    for route in routes:
        if not isinstance(route, Route) or route.methods is None:
            continue
        for method in route.methods - {"HEAD"}:
            scope = {"type": "http", "method": method, "path": _example_path(route)}
            first = next(r for r in routes if r.matches(scope)[0] is Match.FULL)
            assert first is route, f"{method} {route.path} is answered by {first}"
            checked += 1
    assert checked > 30


def test_the_per_job_routes_are_tried_first(app_factory: Callable[..., FastAPI]) -> None:
    paths = [getattr(route, "path", "") for route in app_factory().router.routes]
    for hot in ("/v1/leases", "/v1/leases/{lease_id}/complete", "/v1/acks"):
        assert paths.index(hot) < paths.index("/healthz")
    assert paths.index("/v1/queues/{queue}/jobs") < paths.index("/v1/keys")


class _Tracer(trace.NoOpTracer):
    def __init__(self, names: list[str]) -> None:
        self.names = names

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> trace.Span:
        self.names.append(name)
        return super().start_span(name, *args, **kwargs)


class _Provider(trace.TracerProvider):
    """A configured tracer provider (not a no-op one, which FastAPI skips) that remembers
    the names of the spans started."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _Tracer(self.names)


@pytest.fixture
def tracer_provider(monkeypatch: pytest.MonkeyPatch) -> _Provider:
    """OpenTelemetry configured with a provider, as `opentelemetry-instrument` would."""
    provider = _Provider()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    return provider


@pytest.mark.parametrize("enabled", [True, False])
async def test_requests_are_traced_only_when_opentelemetry_is_on(
    app_factory: Callable[..., FastAPI],
    client_factory: Callable[[FastAPI], Any],
    tracer_provider: _Provider,
    enabled: bool,
) -> None:
    client: httpx.AsyncClient = await client_factory(app_factory(opentelemetry=enabled))
    await enqueue(client, "traced")
    # the request's span (named by its method until its route is known), and spans of
    # the dependencies and the endpoint inside it
    traced = ["POST", "fastapi.dependencies", "fastapi.endpoint"]
    assert tracer_provider.names[:3] == (traced if enabled else [])
