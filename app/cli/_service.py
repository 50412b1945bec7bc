"""The operator commands' way to the service, written once: the options they share, the
SDK client that makes every call, and the one line an error becomes.

A command that calls the service is declared `@group.command(name, cls=Operator)`. It
takes `--url`, `--api-key`, `--output`/`-o` and `--json` after its own options, as it
always has (`jobq jobs list --url … -o json`), yet declares none of them: `Operator`
adds them to the command and hands their values to it as a `Session` in `ctx.obj`.
Options on a group's callback would have to come before the subcommand (`jobq jobs
--url … list`), and typer has no options that subcommands inherit; a command class
(typer's documented `cls=`) keeps one declaration and every option's place.
`Connected` commands take only `--url` and `--api-key`, `Printing` ones only the output
options.

The SDK finds the service: `--url`, else `JOBQ_URL`, else `http://JOBQ_HOST:JOBQ_PORT`
(a wildcard host is reached on loopback); the key is `--api-key`, else `JOBQ_API_KEY`.
An error answer or an unreachable service ends the command with one line
(`Session.failure`) and exit status 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from http import HTTPStatus
from typing import Annotated, Any

import httpx
import pydantic
import typer
from typer.core import TyperCommand

from app.cli._output import JsonFlag, Output, OutputOption, fail
from app.core.config import Settings
from jobq_client import Client, ConnectionFailed, JobqError, RetryPolicy

TIMEOUT_SECONDS = 35.0  # an operator waits longer for a slow answer than a worker would
NO_RETRY = RetryPolicy(max_retries=0)  # a command says at once what failed; rerun it

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
        fail(invalid_configuration(exc))


def invalid_configuration(exc: pydantic.ValidationError) -> str:
    """The one line that says which settings are wrong, and why."""
    reasons = "; ".join(
        f"JOBQ_{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors()
    )
    return f"invalid configuration: {reasons}"


@dataclass
class Session:
    """What an operator command was given (its `ctx.obj`): where the service is, the key
    to send, whether to print JSON; and the answers it received, as the service sent
    them (what `--output json` prints)."""

    url: str | None = None
    api_key: str | None = None
    as_json: bool = False
    answers: list[Any] = field(default_factory=list)

    @classmethod
    def of(cls, ctx: typer.Context) -> Session:
        session = ctx.obj
        assert isinstance(session, Session), "not an Operator command"
        return session

    @cached_property
    def jobq(self) -> Client:
        """The SDK client of this command (made on first use, closed when it ends)."""
        settings()  # a broken configuration is reported as such, before any call
        return Client(
            self.url or None,
            api_key=self.api_key or None,
            timeout=TIMEOUT_SECONDS,
            retry=NO_RETRY,
            on_answer=self.answers.append,
        )

    @property
    def answer(self) -> Any:
        """The last answer's JSON."""
        return self.answers[-1]

    def close(self) -> None:
        if "jobq" in self.__dict__:
            self.jobq.close()

    def failure(self, error: Exception) -> str:
        """An error of a call, in one line: an unreachable service and why; an error
        answer's title, status, code, detail and the reason for each invalid field."""
        if isinstance(error, httpx.InvalidURL):  # before a client could be made
            return f"invalid --url {self.url or '(JOBQ_URL)'!r}: {error}"
        if isinstance(error, ConnectionFailed | httpx.HTTPError):
            cause = error.__cause__ if isinstance(error, ConnectionFailed) else error
            reason = str(cause or error) or type(cause or error).__name__
            return f"cannot reach the jobq service at {self.jobq.base_url}: {reason}"
        assert isinstance(error, JobqError)
        return problem_line(error)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def problem_line(error: JobqError) -> str:
    """An error answer in one line: a problem's title, status, code, detail and the reason
    for each invalid field; anything else as its status and what the SDK made of it."""
    problem = error.problem
    if "title" not in problem:
        if error.status is None:
            return error.detail
        phrase = _phrase(error.status)
        said = "" if error.detail == phrase else f": {error.detail}"
        return f"HTTP {error.status} {phrase}{said}".rstrip()
    code = f" [{problem['code']}]" if problem.get("code") else ""
    detail = problem.get("detail") or ""
    errors = problem.get("errors")
    if isinstance(errors, list) and errors:
        detail = "; ".join(
            f"{'.'.join(map(str, e.get('loc', [])))}: {e.get('msg', '')}"
            for e in errors
            if isinstance(e, dict)
        )
    if error.status == 401:  # the service names its header; the CLI has these
        detail = f"{detail.partition(': send ')[0]} (pass --api-key or set JOBQ_API_KEY)"
    return f"{problem['title']} ({error.status}){code}: {detail}".rstrip(": ")


# ---- the shared options, declared once ------------------------------------------------


def _connection(url: UrlOption = None, api_key: KeyOption = None) -> None:
    """The options of a command that calls the service."""


def _printing(output: OutputOption = Output.TABLE, as_json: JsonFlag = False) -> None:
    """The options of a command that prints an answer."""


def _options(template: Callable[..., None]) -> list[Any]:
    """The options typer makes of `template`'s parameters (made anew for each command)."""
    holder = typer.Typer(add_completion=False)
    holder.command()(template)
    return list(typer.main.get_command(holder).params)


class SessionCommand(TyperCommand):
    """A command that declares none of the shared options it takes: it adds those of its
    `templates` after its own, and hands their values to the command as a `Session` in
    `ctx.obj`; an error of a call to the service ends it with one line."""

    templates: tuple[Callable[..., None], ...] = ()

    def __init__(self, name: str | None, **settings: Any) -> None:
        super().__init__(name, **settings)
        for template in self.templates:
            self.params.extend(_options(template))

    def invoke(self, ctx: Any) -> Any:  # typer's Context is click's, as the base takes
        given = {
            name: ctx.params.pop(name, None) for name in ("url", "api_key", "output", "as_json")
        }
        as_json = bool(given["as_json"]) or given["output"] == Output.JSON
        ctx.obj = session = Session(given["url"], given["api_key"], as_json)
        try:
            return super().invoke(ctx)
        except (JobqError, httpx.HTTPError, httpx.InvalidURL) as error:
            fail(session.failure(error))
        finally:
            session.close()


class Operator(SessionCommand):
    """A command that calls the service and prints its answer, as a table or JSON."""

    templates = (_connection, _printing)


class Connected(SessionCommand):
    """A command that calls the service and prints no answer of its own."""

    templates = (_connection,)


class Printing(SessionCommand):
    """A command that prints, as a table or JSON, what it finds without the service."""

    templates = (_printing,)
