"""The CLI on its own: where it finds the service and the key, `jobq config`, `--version`,
how it reports answers that are errors, its shared options, and durations for people."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, get_args

import httpx
import pytest
import typer
from typer.testing import CliRunner, Result

from app.cli import _output, _service, cli
from app.cli.jobs import State
from app.jobs import JobState
from jobq_client import Client, JobqError, RetryPolicy
from tests.helpers import free_port

WIDE = {"COLUMNS": "220"}  # rich tables at full width


async def jobq(*args: str, env: dict[str, str] | None = None) -> Result:
    """`jobq ARGS…` in a thread, so this loop goes on serving the requests it makes."""
    runner = CliRunner()
    return await asyncio.to_thread(runner.invoke, cli, list(args), env={**WIDE, **(env or {})})


def one_error_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("jobq: ")
    return line


async def test_an_unreachable_service_is_one_line_and_exit_1() -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    for command in (["stats"], ["jobs", "list"], ["queues", "pause", "q"]):
        line = one_error_line(await jobq(*command, "--url", closed))
        assert line.startswith(f"jobq: cannot reach the jobq service at {closed}: "), line
    line = one_error_line(await jobq("stats", "--url", "nonsense"))
    assert "nonsense" in line


@pytest.mark.parametrize("command", [["serve"], ["migrate"], ["keys", "list"], ["config"]])
def test_a_setting_that_does_not_validate_is_one_line_and_exit_1(command: list[str]) -> None:
    env = {**os.environ, "JOBQ_LOG_LEVEL": "loud", "JOBQ_DATABASE_URL": "postgresql://nowhere/x"}
    ran = subprocess.run(
        [sys.executable, "-m", "app", *command], env=env, capture_output=True, text=True
    )
    assert ran.returncode == 1 and ran.stdout == "", ran
    assert ran.stderr.splitlines() == [
        "jobq: invalid configuration: JOBQ_LOG_LEVEL: Input should be 'DEBUG', 'INFO',"
        " 'WARNING' or 'ERROR'"
    ], ran.stderr


def test_a_log_level_may_be_written_in_any_case() -> None:
    result = CliRunner().invoke(cli, ["config", "--json"], env={"JOBQ_LOG_LEVEL": "warning"})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["log_level"]["value"] == "WARNING"


def _error(answer: httpx.Response) -> JobqError:
    """The error the SDK raises for this answer (no retry)."""
    transport = httpx.MockTransport(lambda request: answer)
    with Client("http://jobq.test", transport=transport, retry=RetryPolicy(0)) as client:
        try:
            client.get_queue_settings("q")
        except JobqError as error:
            return error
    raise AssertionError("no error raised")


def test_errors_that_are_not_problems_are_shown_briefly() -> None:
    html = httpx.Response(502, text="<html>\n  bad   gateway\n</html>")
    assert _service.problem_line(_error(html)) == "HTTP 502 Bad Gateway"
    plain = httpx.Response(404, json={"detail": "Not Found"})  # another FastAPI, not jobq
    assert _service.problem_line(_error(plain)) == "HTTP 404 Not Found"
    problem = httpx.Response(409, json={"title": "Conflict", "detail": "no", "code": "conflict"})
    assert _service.problem_line(_error(problem)) == "Conflict (409) [conflict]: no"
    not_json = httpx.Response(200, text="<html>a web site</html>")
    assert _service.problem_line(_error(not_json)) == (
        "the answer from http://jobq.test/v1/queues/q/settings is not jobq's"
        " (is http://jobq.test jobq?)"
    )


def test_durations_read_well() -> None:
    shown = [_output.seconds(s) for s in (None, 0.0123, 12.34, 245, 7380, 200000)]
    assert shown == ["-", "12ms", "12.3s", "4m05s", "2h03m", "2d07h"]


async def test_the_api_key_is_sent_as_a_bearer_token(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"queue": "q", "paused": True, "paused_at": "2026"})

    class Recording(Client):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, transport=httpx.MockTransport(answer), **kwargs)

    monkeypatch.setattr(_service, "Client", Recording)
    assert (await jobq("queues", "pause", "q", "--api-key", "s3cret")).exit_code == 0
    assert (await jobq("queues", "pause", "q", env={"JOBQ_API_KEY": "from-env"})).exit_code == 0
    assert (await jobq("queues", "pause", "q")).exit_code == 0
    assert seen == ["Bearer s3cret", "Bearer from-env", None]


def test_the_version() -> None:
    from app import __version__

    result = CliRunner().invoke(cli, ["--version"])
    assert (result.exit_code, result.stdout) == (0, f"jobq {__version__}\n")


@pytest.mark.parametrize(
    ("env", "args", "expected"),
    [
        ({"JOBQ_PORT": "18810"}, [], "http://127.0.0.1:18810"),
        ({"JOBQ_HOST": "0.0.0.0", "JOBQ_PORT": "9"}, [], "http://127.0.0.1:9"),
        ({"JOBQ_HOST": "::", "JOBQ_PORT": "9"}, [], "http://[::1]:9"),
        ({"JOBQ_HOST": "10.1.2.3"}, [], "http://10.1.2.3:8000"),
        (
            {"JOBQ_URL": "http://jobq.internal:80", "JOBQ_PORT": "18810"},
            [],
            "http://jobq.internal:80",
        ),
        ({"JOBQ_URL": "http://jobq.internal:80"}, ["--url", "http://flag:1"], "http://flag:1"),
    ],
)
def test_every_command_finds_the_service_the_same_way(
    env: dict[str, str], args: list[str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("JOBQ_URL", "JOBQ_HOST", "JOBQ_PORT", "JOBQ_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(cli, ["config", "--output", "json", *args], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["service url (in use)"]["value"] == expected
    if "10.1.2.3" not in expected:  # an operator command calls just there (nothing listens)
        called = CliRunner().invoke(cli, ["stats", *args], env=env)
        assert f"cannot reach the jobq service at {expected}" in called.stderr


def test_config_masks_secrets_and_names_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "jobq_0123456789abcdef_" + "S" * 43
    env = {
        "JOBQ_API_KEY": secret,
        "JOBQ_DATABASE_URL": "postgresql://jobq:hunter2@db.internal:5432/jobq",
        "JOBQ_REAPER_INTERVAL_SECONDS": "7",
    }
    result = CliRunner().invoke(cli, ["config"], env={**env, "COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "S" * 43 not in result.stdout and "hunter2" not in result.stdout
    assert "jobq_0123456789abcdef_…" in result.stdout and "***" in result.stdout
    data = json.loads(CliRunner().invoke(cli, ["config", "--json"], env=env).stdout)
    assert data["reaper_interval_seconds"] == {
        "value": 7.0,
        "source": "JOBQ_REAPER_INTERVAL_SECONDS",
    }
    assert data["port"] == {"value": 8000, "source": "default"}
    assert data["api key (in use)"]["source"] == "JOBQ_API_KEY"
    broken = CliRunner().invoke(cli, ["config"], env={"JOBQ_PORT": "not-a-port"})
    assert broken.exit_code == 1 and "invalid configuration: JOBQ_PORT" in broken.stderr


def test_a_401_says_how_the_cli_sends_a_key() -> None:
    refused = httpx.Response(
        401,
        json={
            "title": "Unauthorized",
            "code": "unauthorized",
            "detail": "this request needs an API key: send 'Authorization: Bearer <key>'",
        },
    )
    message = _service.problem_line(_error(refused))
    assert message == (
        "Unauthorized (401) [unauthorized]: this request needs an API key"
        " (pass --api-key or set JOBQ_API_KEY)"
    )


def test_the_state_filter_takes_every_state_the_api_takes() -> None:
    assert {state.value for state in State} == set(get_args(JobState))


# ---- help ------------------------------------------------------------------------------


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_every_help_fits_80_columns_and_says_it_all() -> None:
    commands = list(_commands(typer.main.get_command(cli)))
    assert len(commands) > 30  # every group and command, not only the root
    for path, command in commands:
        result = CliRunner().invoke(cli, [*path, "--help"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, (path, result.output)
        text = result.stdout
        assert all(len(line) <= 80 for line in text.splitlines()), (path, text)
        assert "<bool>" not in text, (path, text)  # a flag takes no value
        assert not any(line.endswith("...") for line in text.splitlines()[1:]), (path, text)
        flat = " ".join(text.split())
        for param in command.params:
            declared = getattr(param, "help", None) or ""
            if "[default" in declared:  # written out, not eaten as markup
                assert " ".join(declared.split()) in flat, (path, declared, text)


def test_operator_options_are_declared_once_and_taken_after_the_command() -> None:
    """Every command that calls the service takes --url and --api-key, and every one that
    prints an answer --output/-o and --json, after its own options: `Operator` adds them."""
    shared = {"url": ["--url"], "api_key": ["--api-key"]}
    printed = {"output": ["--output", "-o"], "as_json": ["--json"]}
    commands = dict(_commands(typer.main.get_command(cli)))
    for path, command in commands.items():
        names = {p.name: sorted(p.opts) for p in command.params}
        groups = (("jobs",), ("queues",), ("schedules",), ("subscriptions",), ("workers",))
        if path[:1] in (("stats",), ("config",), ("audit",), *groups):
            if path in groups:
                continue  # the groups themselves
            wanted = shared if path == ("schedules", "delete") else {**shared, **printed}
        elif path[:1] == ("keys",) and len(path) == 2:
            wanted = printed
        elif path == ("worker",):
            wanted = shared
        else:
            assert not {"url", "as_json"} & names.keys(), path  # (openapi has its own -o)
            continue
        assert {n: names.get(n) for n in wanted} == wanted, path
        own = [p.name for p in command.params]
        assert own[-len(wanted) :] == list(wanted), path  # after the command's own
