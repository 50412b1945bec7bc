"""The operator commands against a real service on a free port (uvicorn, real HTTP)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from typer.testing import CliRunner, Result

from app.cli import cli
from app.delivery import new_secret
from tests.helpers import served

WIDE = {"COLUMNS": "220"}  # rich tables at full width


@pytest.fixture
def app(app_factory: Callable[..., FastAPI]) -> FastAPI:
    """The app, its event stamper and subscriptions idle: `jobq stats` reports any open
    transaction, and theirs come every tenth of a second."""
    return app_factory(event_stamp_interval_seconds=10, subscription_interval_seconds=60)


@pytest.fixture
async def service(app: FastAPI) -> AsyncIterator[str]:
    """The app served over HTTP by uvicorn in this test's event loop; its base URL."""
    async with served(app) as url:
        yield url


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


@pytest.fixture
async def http(service: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=service) as client:
        yield client


async def _job(http: httpx.AsyncClient, queue: str, **fields: Any) -> dict[str, Any]:
    response = await http.post(f"/v1/queues/{queue}/jobs", json={"type": "mailer", **fields})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def _lease(http: httpx.AsyncClient, queue: str) -> dict[str, Any]:
    response = await http.post("/v1/leases", json={"queues": [queue], "worker_id": "w-cli"})
    (only,) = response.json()["leases"]
    result: dict[str, Any] = only
    return result


async def test_stats_shows_every_queue_and_one_in_detail(
    service: str, http: httpx.AsyncClient
) -> None:
    for _ in range(3):
        await _job(http, "mail")
    running = await _lease(http, "mail")
    beat = {"progress": {"percent": 40, "stage": "render"}}
    await http.post(f"/v1/leases/{running['lease_id']}/heartbeat", json=beat)

    result = await jobq("stats", env={"JOBQ_URL": service})  # the URL from the environment
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.stdout.splitlines() if line.startswith("mail")]
    cells = row.split()
    assert cells[:6] == ["mail", "2", "2", "1", "0", "0"]  # queued, due, running, waiting, failed
    assert cells[7] == "3/0/0" and cells[8] == "3/0/0"  # after the oldest due job's age
    assert "jobs table:" in result.stdout and "oldest open transaction: none" in result.stdout

    detail = await jobq("stats", "mail", "--url", service)
    assert detail.exit_code == 0, detail.output
    assert "running in mail" in detail.stdout
    assert str(running["job"]["id"]) in detail.stdout and "40% render" in detail.stdout

    raw = await jobq("stats", "--json", "--url", service)
    assert raw.exit_code == 0
    assert [q["queue"] for q in json.loads(raw.stdout)["queues"]] == ["mail"]


async def test_jobs_list_and_show(service: str, http: httpx.AsyncClient) -> None:
    first = await _job(http, "mail", payload={"to": "ada"})
    await _job(http, "other")
    lease = await _lease(http, "mail")
    await http.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": {"type": "SMTPDown"}})

    listed = await jobq("jobs", "list", "--queue", "mail", "--url", service)
    assert listed.exit_code == 0, listed.output
    (row,) = [line for line in listed.stdout.splitlines() if line.split()[:1] == [str(first["id"])]]
    assert "mail" in row and "queued" in row and "1/5" in row and "SMTPDown" in row
    assert "other" not in listed.stdout

    shown = await jobq("jobs", "show", str(first["id"]), "--url", service)
    assert shown.exit_code == 0, shown.output
    assert "mail / mailer" in shown.stdout and "SMTPDown" in shown.stdout
    assert re.search(r"trace id +-", shown.stdout)
    assert "w-cli" in shown.stdout and "failed" in shown.stdout  # the attempts table
    assert "ada" not in shown.stdout  # the payload only with --json

    raw = await jobq("jobs", "show", str(first["id"]), "--json", "--url", service)
    assert json.loads(raw.stdout)["payload"] == {"to": "ada"}


async def test_jobs_explain_lists_the_reasons(service: str, http: httpx.AsyncClient) -> None:
    job = await _job(http, "later", delay_seconds=600)
    assert (await http.post("/v1/queues/later/pause")).status_code == 200
    shown = await jobq("jobs", "explain", str(job["id"]), "--url", service)
    assert shown.exit_code == 0, shown.output
    assert "not leasable now" in shown.stdout
    assert "scheduled" in shown.stdout and "paused" in shown.stdout
    raw = await jobq("jobs", "explain", str(job["id"]), "--json", "--url", service)
    assert {r["code"] for r in json.loads(raw.stdout)["reasons"]} >= {"scheduled", "paused"}


async def test_problems_are_one_line(service: str) -> None:
    line = one_error_line(await jobq("jobs", "show", "999", "--url", service))
    assert line == "jobq: Job not found (404) [job_not_found]: no job has id 999"
    line = one_error_line(await jobq("jobs", "retry", "999", "--run-at", "2030-01-01T00:00:00",
                                     "--url", service))  # fmt: skip
    assert line == (
        "jobq: Validation error (422) [validation_error]: body.run_at: "
        "Input should have timezone info"
    )


async def test_cancel_retry_pause_and_resume(service: str, http: httpx.AsyncClient) -> None:
    queued = await _job(http, "mail")
    result = await jobq("jobs", "cancel", str(queued["id"]), "--url", service)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"job {queued['id']}: cancelled\n"

    result = await jobq("jobs", "retry", str(queued["id"]), "--url", service)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"job {queued['id']}: queued, due ")

    running = await _lease(http, "mail")
    result = await jobq("jobs", "cancel", str(running["job"]["id"]), "--url", service)
    assert result.exit_code == 0, result.output
    assert "running; cancellation requested" in result.stdout
    done = await http.post(f"/v1/leases/{running['lease_id']}/complete")
    assert done.json()["state"] == "succeeded"
    line = one_error_line(await jobq("jobs", "cancel", str(running["job"]["id"]), "--url", service))
    assert line.startswith("jobq: Job finished (409) [job_finished]: ")

    result = await jobq("queues", "pause", "mail", "--url", service)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("queue mail: paused since ")
    assert (await http.get("/v1/queues/mail")).json()["paused"] is True
    result = await jobq("queues", "resume", "mail", "--url", service)
    assert result.stdout == "queue mail: active\n"
    assert (await http.get("/v1/queues/mail")).json()["paused"] is False

    result = await jobq("jobs", "retry", str(queued["id"]), "--json", "--url", service)
    assert result.exit_code == 1 and "job_not_retryable" in result.stderr


# ---- 80 columns, json for scripts, one configuration story ----------------------------

NARROW = {"COLUMNS": "80"}
LONG_QUEUE = "notifications.email-digest"


async def _narrow(*args: str, service: str) -> Result:
    result = await jobq(*args, "--url", service, env=NARROW)
    assert result.exit_code == 0, result.output
    assert all(len(line) <= 80 for line in result.stdout.splitlines()), result.stdout
    return result


async def test_tables_fit_80_columns_and_keep_their_key_values_whole(
    service: str, http: httpx.AsyncClient
) -> None:
    job = await _job(http, LONG_QUEUE, run_at="2030-01-01T00:00:00Z")
    await _job(http, LONG_QUEUE)
    await _lease(http, LONG_QUEUE)

    stats = (await _narrow("stats", service=service)).stdout
    backlog = [line for line in stats.splitlines() if line.startswith(LONG_QUEUE)]
    assert len(backlog) == 2, stats  # one row in the backlog table, one in throughput
    # queued 1 (due 0: it runs in 2030), running 1, waiting 0, failed 0, no due job
    assert backlog[0].split()[1:7] == ["1", "0", "1", "0", "0", "-"], backlog
    assert "p50/p95" in stats and "last hour" in stats  # the windows are there, not dropped
    assert "…" not in stats

    listed = (await _narrow("jobs", "list", service=service)).stdout
    row = next(line for line in listed.splitlines() if line.split()[:1] == [str(job["id"])])
    assert LONG_QUEUE in row and "queued" in row and "in " in row  # due in ~4 years
    assert "…" not in listed

    shown = (await _narrow("jobs", "show", str(job["id"]), service=service)).stdout
    assert "2030-01-01 00:00:00Z" in shown

    wide = await jobq("jobs", "list", "--url", service, env={"COLUMNS": "200"})
    assert "2030-01-01 00:00:00Z" in wide.stdout  # room enough for the whole time


async def test_every_operator_command_speaks_json(service: str, http: httpx.AsyncClient) -> None:
    job = await _job(http, "mail")
    failed = await _job(http, "mail", max_attempts=1)
    lease = (await http.post("/v1/leases", json={"queues": ["mail"], "worker_id": "w"})).json()
    token = next(x["lease_id"] for x in lease["leases"] if x["job"]["id"] == job["id"])
    await http.post(f"/v1/leases/{token}/fail", json={"error": {"type": "E"}, "retryable": False})
    del failed
    commands = [
        ["stats"],
        ["stats", "mail"],
        ["jobs", "list"],
        ["jobs", "show", str(job["id"])],
        ["jobs", "retry", str(job["id"])],
        ["jobs", "cancel", str(job["id"])],
        ["jobs", "delete", str(job["id"]), "--yes"],
        ["queues", "list"],
        ["queues", "show", "mail"],
        ["queues", "pause", "mail"],
        ["queues", "resume", "mail"],
        ["queues", "redrive", "mail", "--yes"],
        ["queues", "settings", "mail", "--max-backlog", "10"],
        ["queues", "settings", "mail"],
        ["queues", "purge", "mail", "--yes"],
        ["config"],
    ]
    for command in commands:
        for flag in (["--output", "json"], ["-o", "json"], ["--json"]):
            result = await jobq(*command, *flag, "--url", service)
            assert result.exit_code == 0, (command, result.output)
            json.loads(result.stdout)  # nothing but JSON on stdout
            if command[:2] in (["jobs", "delete"], ["jobs", "retry"], ["jobs", "cancel"]):
                break  # each acts once
    settings = await jobq("queues", "settings", "mail", "--output", "json", "--url", service)
    assert json.loads(settings.stdout)["max_backlog"] == 10


async def test_destructive_commands_ask_first(service: str, http: httpx.AsyncClient) -> None:
    await _job(http, "mail")
    runner = CliRunner()
    refused = await asyncio.to_thread(
        runner.invoke, cli, ["queues", "purge", "mail", "--url", service], input="n\n"
    )
    assert refused.exit_code == 1 and "Aborted" in refused.output
    assert (await http.get("/v1/queues/mail")).json()["counts"]["queued"] == 1
    agreed = await asyncio.to_thread(
        runner.invoke, cli, ["queues", "purge", "mail", "--url", service], input="y\n"
    )
    assert agreed.exit_code == 0, agreed.output
    assert "queue mail: 1 jobs deleted" in agreed.stdout


async def test_invalid_values_are_refused_with_the_valid_ones(service: str) -> None:
    result = await jobq("jobs", "list", "--state", "bogus", "--url", service, env=NARROW)
    assert result.exit_code == 2
    for state in ("queued", "running", "succeeded", "failed", "cancelled"):
        assert state in result.output, result.output


async def test_schedules_set_list_show_pause_resume_delete(service: str) -> None:
    made = await jobq(
        "schedules", "set", "nightly", "--cron", "0 3 * * *", "--queue", "reports",
        "--type", "rollup", "--payload", '{"span": "day"}', "--timezone", "Europe/Paris",
        "--url", service,
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    assert "0 3 * * * (Europe/Paris)" in made.stdout and "next runs:" in made.stdout

    listed = await _narrow("schedules", "list", service=service)
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith("nightly")]
    assert "0 3 * * * Europe/Paris" in row and "active" in row and "in " in row
    assert all(len(line) <= 80 for line in listed.stdout.splitlines())

    shown = await jobq("schedules", "show", "nightly", "-o", "json", "--url", service)
    body = json.loads(shown.stdout)
    assert body["payload"] == {"span": "day"} and len(body["next_runs"]) == 5
    assert all(t.endswith(("02:00:00Z", "01:00:00Z")) for t in body["next_runs"])  # 3h Paris

    paused = await jobq("schedules", "pause", "nightly", "--url", service)
    assert paused.stdout.strip() == "schedule nightly: paused"
    resumed = await jobq("schedules", "resume", "nightly", "--json", "--url", service)
    assert json.loads(resumed.stdout)["paused"] is False

    refused = await jobq(
        "schedules", "set", "bad", "--cron", "61 * * * *", "--queue", "q", "--type", "t",
        "--url", service,
    )  # fmt: skip
    assert "cron" in one_error_line(refused)
    not_json = await jobq(
        "schedules", "set", "bad", "--cron", "@daily", "--queue", "q", "--type", "t",
        "--payload", "{nope", "--url", service,
    )  # fmt: skip
    assert not_json.exit_code == 2 and "--payload" in not_json.output

    deleted = await jobq("schedules", "delete", "nightly", "--yes", "--url", service)
    assert deleted.stdout.strip() == "schedule nightly: deleted"
    gone = await jobq("schedules", "show", "nightly", "--url", service)
    assert "schedule_not_found" in one_error_line(gone) or "nightly" in one_error_line(gone)


async def test_queue_limits_are_set_and_shown(service: str, http: httpx.AsyncClient) -> None:
    changed = await jobq(
        "queues", "settings", "enc", "--max-running", "1", "--rate-limit", "100/60",
        "--backoff-cap", "30", "--url", service,
    )  # fmt: skip
    assert changed.exit_code == 0, changed.output
    lines = {
        line.split()[0]: line.split(maxsplit=1)[1].strip()
        for line in changed.stdout.splitlines()[1:]
    }
    assert lines["max_running"] == "1" and lines["rate_limit"] == "100 per 60s"
    assert lines["backoff_cap_seconds"] == "30.0" and lines["max_backlog"] == "none"
    await _job(http, "enc")
    await _job(http, "enc")
    await _lease(http, "enc")
    shown = await jobq("stats", "enc", "--url", service)
    assert "limits: max_running 1 (1 held back); rate 100 per 60s (1 used, 0 held back)" in (
        shown.stdout
    )
    cleared = await jobq("queues", "settings", "enc", "--rate-limit", "none", "-o", "json",
                         "--url", service)  # fmt: skip
    assert json.loads(cleared.stdout)["rate_limit"] is None
    bad = await jobq("queues", "settings", "enc", "--rate-limit", "fast", "--url", service)
    assert bad.exit_code == 2 and "JOBS/SECONDS" in bad.output


async def test_jobs_show_prints_the_last_errors_traceback_line_by_line(
    service: str, http: httpx.AsyncClient
) -> None:
    job = await _job(http, "mail")
    lease = await _lease(http, "mail")
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/srv/tasks.py", line 12, in send\n'
        "    smtp.send(message)\n"
        "ConnectionError: upstream down\n"
    )
    error = {"type": "ConnectionError", "message": "upstream down", "details": {"traceback": trace}}
    await http.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": error})
    shown = await jobq("jobs", "show", str(job["id"]), "--url", service)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[lines.index("traceback of the last error") + 1 :][:4] == trace.splitlines()
    assert "\\n" not in shown.stdout


async def test_jobs_list_filters_waiting_jobs(service: str, http: httpx.AsyncClient) -> None:
    parent = await _job(http, "mail")
    child = await _job(http, "mail", depends_on=[parent["id"]])
    listed = await jobq("jobs", "list", "--state", "waiting", "--json", "--url", service)
    assert listed.exit_code == 0, listed.output
    assert [j["id"] for j in json.loads(listed.stdout)["jobs"]] == [child["id"]]


@pytest.mark.parametrize("columns", ["80", "100"])
async def test_table_titles_stay_on_one_line(
    service: str, http: httpx.AsyncClient, columns: str
) -> None:
    await _job(http, "mail")
    result = await jobq("stats", "--url", service, env={"COLUMNS": columns})
    assert result.exit_code == 0, result.output
    assert "throughput: in/ok/failed; p50/p95 wait (enqueue to lease) and run" in (
        result.stdout.splitlines()
    )


async def test_stats_warns_of_an_unknown_queue_and_names_unserved_types(
    service: str, http: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    typo = await jobq("stats", "emals", "--url", service)
    assert typo.exit_code == 0, typo.output
    assert "'emals' has no jobs and no settings" in typo.stderr
    as_json = await jobq("stats", "emals", "--json", "--url", service)
    assert json.loads(as_json.stdout)["known"] is False

    await _job(http, "mail", type="bounce")
    await db.execute("UPDATE jobq.jobs SET run_at = now() - interval '10 minutes'")
    known = await jobq("stats", "mail", "--url", service)
    assert known.exit_code == 0 and known.stderr == "", known.output
    assert re.search(r"no worker leased lately: bounce \(due 10m0\ds, never leased\)", known.stdout)


async def test_a_push_target_is_set_shown_and_cleared(service: str) -> None:
    secret = "whsec_" + "QUJD" * 8
    pushed = await jobq(
        "queues", "settings", "hooks", "--push-url", "https://hooks.example.com/jobq",
        "--push-secret", secret, "--push-header", "x-env: prod", "--push-timeout", "5",
        "--url", service,
    )  # fmt: skip
    assert pushed.exit_code == 0, pushed.output
    line = next(row for row in pushed.stdout.splitlines() if row.split()[0] == "push")
    assert "https://hooks.example.com/jobq; timeout 5s; headers x-env; secrets " in line
    assert secret not in pushed.stdout and "prod" not in pushed.stdout
    pulled = await jobq("queues", "settings", "hooks", "--pull", "-o", "json", "--url", service)
    assert json.loads(pulled.stdout)["push"] is None
    lost = await jobq("queues", "settings", "hooks", "--push-secret", secret, "--url", service)
    assert lost.exit_code == 2 and "--push-url" in lost.output
    refused = await jobq(
        "queues", "settings", "hooks", "--push-url", "http://10.0.0.1/x", "--push-secret",
        secret, "--url", service,
    )  # fmt: skip
    assert "target_not_allowed" in one_error_line(refused) or "allow" in refused.output


async def test_jobs_show_names_the_trace_id(service: str, http: httpx.AsyncClient) -> None:
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    job = await _job(http, "mail", trace={"traceparent": traceparent})
    shown = await jobq("jobs", "show", str(job["id"]), "--url", service)
    assert shown.exit_code == 0, shown.output
    assert re.search(r"trace id +4bf92f3577b34da6a3ce929d0e0e4736", shown.stdout), shown.stdout


async def test_workers_list_quiet_resume(
    app: FastAPI, service: str, http: httpx.AsyncClient
) -> None:
    headers = {"Jobq-Worker-Sdk": "jobq-client-python/1.2.3", "Jobq-Worker-Host": "box-1"}
    body = {"queues": ["mail"], "types": ["send"]}
    pinged = await http.post("/v1/workers/idle-1/presence", json=body, headers=headers)
    assert pinged.status_code == 200, pinged.text
    await app.state.services.presence.run_once()

    listed = await _narrow("workers", "list", service=service)
    assert listed.exit_code == 0, listed.output
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith("idle-1")]
    assert "live" in row and "box-1" in row and "mail" in row
    assert all(len(line) <= 80 for line in listed.stdout.splitlines())

    quieted = await jobq("workers", "quiet", "idle-1", "--url", service)
    assert quieted.exit_code == 0, quieted.output
    assert quieted.stdout.startswith("worker idle-1: quiet")
    raw = await jobq("workers", "list", "--json", "--url", service)
    (shown,) = json.loads(raw.stdout)
    assert shown["quiet"] is True and shown["sdk"] == "jobq-client-python"
    resumed = await jobq("workers", "resume", "idle-1", "--json", "--url", service)
    assert json.loads(resumed.stdout)["quiet"] is False
    unknown = await jobq("workers", "quiet", "nobody", "--url", service)
    assert "nobody" in one_error_line(unknown) or "worker" in one_error_line(unknown)


async def test_stats_of_a_pushed_queue_shows_its_deliveries_and_breaker(
    app_factory: Callable[..., FastAPI], db: asyncpg.Connection
) -> None:
    app = app_factory(
        push_allowed_targets=("http://127.0.0.1:*",), subscription_interval_seconds=60
    )
    async with served(app) as service, httpx.AsyncClient(base_url=service) as http:
        target = {"url": "http://127.0.0.1:9/hook?token=x", "secrets": [new_secret()]}
        answer = await http.put("/v1/queues/hooks/settings", json={"push": target})
        assert answer.status_code == 200, answer.text
        # what the replicas' dispatchers wrote: 40 deliveries this minute
        await db.execute(
            "INSERT INTO jobq.push_minutes (queue, minute, deliveries, classes, latency_buckets)"
            " VALUES ('hooks', date_trunc('minute', now()), 40,"
            '         \'{"2xx": 37, "5xx": 2, "timeout": 1}\', \'{"10": 39, "29": 1}\')'
        )
        result = await jobq("stats", "hooks", "--url", service)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "push to 127.0.0.1: breaker closed" in lines
    hour = next(line for line in lines if line.startswith("  last hour:"))
    assert hour == "  last hour: 40 deliveries (2xx 37, 5xx 2, timeout 1), p50/p95 27ms/27ms"
    assert "token" not in result.stdout and "/hook" not in result.stdout
