"""Who may call what, read off the app's routes: every route declares one access rule, the
OpenAPI document asks for the key where one is needed, and key rules match queues."""

from __future__ import annotations

import pytest

from app.core.config import Settings
from app.keys import (
    QueueRule,
    access_of,
    declared_access,
    served_routes,
)
from app.main import create_app

ROUTES = sorted(declared_access(create_app()))


def test_every_route_declares_exactly_one_access_rule() -> None:
    table = declared_access(create_app())
    # The table really is the app's (routers unfolded), not an empty or partial one.
    assert {("POST", "/v1/leases"), ("DELETE", "/v1/keys/{name}"), ("GET", "/docs")} <= set(table)
    assert len(table) >= 25
    undeclared = [route for route, need in table.items() if need is None]
    assert undeclared == [], "declare access with a dependency from app/keys/access.py"


def test_the_openapi_document_asks_keyed_operations_for_the_bearer_key() -> None:
    app = create_app()
    spec = app.openapi()
    assert spec["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    for (method, path), need in declared_access(app).items():
        operation = spec["paths"].get(path, {}).get(method.lower())
        if operation is None:
            continue  # the OpenAPI document and its viewers are not in it
        security = operation.get("security")
        # A probe answers loopback peers without a key: the key is optional there.
        expected: list[dict[str, list[str]]] | None = [{"apiKey": []}]
        if need == "public":
            expected = None
        elif need == "probe":
            expected = [{}, {"apiKey": []}]
        assert security == expected, (method, path)
        if need != "public":
            assert "401" in operation["responses"], (method, path)
        if need not in ("public", "probe"):
            assert "403" in operation["responses"], (method, path)


def test_a_route_that_declares_nothing_is_caught() -> None:
    app = create_app()

    @app.get("/v1/forgotten")
    async def forgotten() -> dict[str, str]:
        return {}

    assert declared_access(app)[("GET", "/v1/forgotten")] is None


def test_routes_open_without_a_key_take_no_body() -> None:
    # KeyGate refuses bodies without a valid key before reading them: only keyed routes
    # may take one.
    for route in served_routes(create_app()):
        if any(rule.need in ("public", "probe") for rule in access_of(route)):
            assert getattr(route, "body_field", None) is None, route.path


def test_queue_rules_match_names_and_patterns() -> None:
    rule = QueueRule(("emails", "reports.*", "team_a.*"))
    for queue in ("emails", "reports.", "reports.daily", "reports.daily.eu", "team_a.x"):
        assert rule.allows(queue), queue
    for queue in ("emails2", "reports", "reportsX", "xreports.daily", "teamXa.x", "Emails"):
        assert not rule.allows(queue), queue
    assert rule.sql() == (["emails"], ["reports.%", "team\\_a.%"])
    assert QueueRule(("*",)).allows("anything") and not QueueRule(()).allows("q")


def test_auth_setting_is_read_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBQ_AUTH", "disabled")
    assert Settings().auth == "disabled"
    monkeypatch.setenv("JOBQ_AUTH", "off")
    with pytest.raises(ValueError, match="auto"):
        Settings()
