"""The dashboard (`/ui`) and the API's interactive docs (`/docs`), served from files in
this package: nothing loads from the internet.

The dashboard is a small single-page app in plain ES modules (`static/`): no framework
and no build step, so what is committed is what runs. It talks only to the public API,
with the API key the operator signs in with (kept in the browser's session storage), so
the API's rules and scopes are the dashboard's. Its pages are served with a strict
Content-Security-Policy (scripts and styles from this origin only) and
`X-Frame-Options: DENY`; so is `/docs`, which shares its origin (Swagger UI's one inline
script is allowed by its hash, and its styles inline).
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.keys import Anyone, KeyedRoute

STATIC = Path(__file__).with_name("static")
UI_PATH = "/ui"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)

_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
SECURITY_HEADERS = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}

router = APIRouter(route_class=KeyedRoute, include_in_schema=False)


@router.get("/")
async def home(_anyone: Anyone) -> RedirectResponse:
    """The dashboard."""
    return RedirectResponse(f"{UI_PATH}/", status_code=307)


@router.get("/docs")
async def docs(_anyone: Anyone) -> HTMLResponse:
    """Swagger UI on the OpenAPI document, its assets served from this package, with
    the dashboard's security headers."""
    page = get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="jobq API",
        swagger_js_url=f"{UI_PATH}/swagger/swagger-ui-bundle.js",
        swagger_css_url=f"{UI_PATH}/swagger/swagger-ui.css",
        swagger_favicon_url=f"{UI_PATH}/favicon.svg",
    )
    html = bytes(page.body).decode()
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"
        for script in _INLINE_SCRIPT.findall(html)
    )
    policy = CSP.replace("script-src 'self'", f"script-src 'self' {hashes}").replace(
        "style-src 'self'", "style-src 'self' 'unsafe-inline'"
    )
    return HTMLResponse(html, headers={"content-security-policy": policy, **SECURITY_HEADERS})


class _Guarded:
    """The dashboard's files, with the security headers on every answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"content-security-policy", CSP.encode()))
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


def mount(app: FastAPI) -> None:
    """Serve the dashboard at /ui (and / redirects there) and the docs at /docs."""
    app.router.routes.extend(router.routes)  # flat, as main adds the API's (no wrappers)
    app.mount(UI_PATH, _Guarded(StaticFiles(directory=STATIC, html=True)), name="ui")
