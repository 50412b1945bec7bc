"""The operator commands' way to the service: where it is, which key to send, and what
its answer means.

Every command finds the service the same way: `--url`, else `JOBQ_URL`, else
`http://JOBQ_HOST:JOBQ_PORT` (a wildcard host is reached on loopback), so
`JOBQ_PORT=18810 jobq stats` reaches a `JOBQ_PORT=18810 jobq serve`. The key is
`--api-key`, else `JOBQ_API_KEY`. An error answer or an unreachable service ends the
command through `fail`: one line with the problem's title, code, detail and each
invalid field's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import httpx
import pydantic
import typer

from app.cli._output import fail
from app.core.config import Settings

TIMEOUT_SECONDS = 35.0  # above the longest request the API serves (a 30 s long poll)

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="The jobq service [default: JOBQ_URL, else http://JOBQ_HOST:JOBQ_PORT].",
        show_default=False,
    ),
]
KeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key", help="Sent as a Bearer token [default: JOBQ_API_KEY].", show_default=False
    ),
]


def settings() -> Settings:
    """The configuration in force now (read afresh: a command runs once)."""
    try:
        return Settings()
    except pydantic.ValidationError as exc:
        reasons = "; ".join(
            f"JOBQ_{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors()
        )
        fail(f"invalid configuration: {reasons}")


def make_client(url: str, api_key: str | None) -> httpx.Client:
    """The HTTP client every command uses (tests may swap it)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=url, headers=headers, timeout=TIMEOUT_SECONDS)


def problem_message(response: httpx.Response) -> str:
    """An error answer in one line: a problem's title, status, code, detail and the reason
    for each invalid field; anything else as its status and first characters."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "title" in body:
        code = f" [{body['code']}]" if body.get("code") else ""
        detail = body.get("detail") or ""
        errors = body.get("errors")
        if isinstance(errors, list) and errors:
            detail = "; ".join(
                f"{'.'.join(map(str, e.get('loc', [])))}: {e.get('msg', '')}"
                for e in errors
                if isinstance(e, dict)
            )
        if response.status_code == 401:  # the service names its header; the CLI has these
            detail = f"{detail.partition(': send ')[0]} (pass --api-key or set JOBQ_API_KEY)"
        return f"{body['title']} ({response.status_code}){code}: {detail}".rstrip(": ")
    text = " ".join(response.text.split())[:200]
    return f"HTTP {response.status_code} {response.reason_phrase}: {text}".rstrip(": ")


@dataclass(frozen=True, slots=True)
class Service:
    """A jobq service and the key to call it with."""

    url: str
    api_key: str | None

    @classmethod
    def find(cls, url: str | None, api_key: str | None) -> Service:
        """The service of `--url`/`--api-key`, else of the configuration."""
        config = settings()
        key = api_key or (config.api_key.get_secret_value() if config.api_key else None)
        return cls(url or config.service_url(), key)

    def call(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """One request; its JSON answer (None for 204), or `fail` with why there is none."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            with make_client(self.url, self.api_key) as http:
                response = http.request(method, path, json=body, params=query)
        except httpx.InvalidURL as exc:
            fail(f"invalid --url {self.url!r}: {exc}")
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            fail(f"cannot reach the jobq service at {self.url}: {reason}")
        if response.is_error:
            fail(problem_message(response))
        if response.status_code == 204:
            return None
        try:
            return response.json()
        except ValueError:
            fail(f"the answer from {self.url}{path} is not JSON (is --url a jobq service?)")
