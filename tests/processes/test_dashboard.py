"""The dashboard in a real browser (Debian's Chromium, driven by Playwright) against a real
`jobq serve` on real PostgreSQL, with API keys: sign in, every page, filters and paging,
each action and its confirmation, a refusal's reason, live refresh, an escaped payload,
a `read` key that cannot act, a `work` key refused at sign-in, jobs shown as links, a
traceback shown as its lines, the queues table whole on a laptop's screen, the audit
log and its filters."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from playwright.sync_api import Browser, Dialog, Locator, Page, expect, sync_playwright

from app.delivery import new_secret
from tests.conftest import plain
from tests.helpers import create_key
from tests.processes.replicas import Replica

# The dashboard in a browser, which no database mode changes: one CI run of two
pytestmark = pytest.mark.once("server")

CHROMIUM = os.environ.get("JOBQ_CHROMIUM", "/usr/bin/chromium")
# What the page should come to, it must within 15 s, not Playwright's default 5: CI runs
# both database modes at once on two cores, and an action's call and the page it renders
# can stall there for seconds (a step once failed with its status line still empty when
# the 5 s ran out).
expect.set_options(timeout=15_000)
SCRIPT = "<script>window.pwned = true</script><img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def keys(database_url: str) -> Iterator[dict[str, str]]:
    """An admin, a read and a work key; none left after (the other tests rely on open
    mode)."""

    async def make() -> dict[str, str]:
        return {
            "admin": await create_key(database_url, "ui-admin", ["admin"]),
            "read": await create_key(database_url, "ui-read", ["read"]),
            "work": await create_key(database_url, "ui-work", ["work", "enqueue"]),
        }

    async def forget() -> None:
        conn = await asyncpg.connect(plain(database_url))
        try:
            await conn.execute("TRUNCATE jobq.api_keys RESTART IDENTITY")
        finally:
            await conn.close()

    yield asyncio.run(make())
    asyncio.run(forget())


@pytest.fixture(scope="module")
def service(
    database_url: str, keys: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replica]:
    del keys  # made first: the service then asks for a key
    replica = Replica(database_url, tmp_path_factory.mktemp("ui") / "serve.log")
    yield replica
    replica.stop()


@pytest.fixture(scope="module")
def browser(service: Replica) -> Iterator[Browser]:
    """Started after the service and its keys: Playwright's sync API runs an event loop
    in this thread from here on."""
    del service
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium is needed at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert errors == [], errors


@pytest.fixture
def admin(service: Replica, keys: dict[str, str]) -> Iterator[httpx.Client]:
    """The API, with the admin key."""
    headers = {"Authorization": f"Bearer {keys['admin']}"}
    with httpx.Client(base_url=service.url, headers=headers, timeout=30) as client:
        yield client


def _sign_in(page: Page, service: Replica, key: str) -> None:
    page.goto(f"{service.url}/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Queues")).to_be_visible()


def _lease(api: httpx.Client, queue: str, max_jobs: int = 1) -> list[dict[str, Any]]:
    body = {"queues": [queue], "max_jobs": max_jobs, "worker_id": "ui-worker"}
    leases: list[dict[str, Any]] = api.post("/v1/leases", json=body).json()["leases"]
    return leases


def test_a_read_key_sees_every_page_and_cannot_act(
    page: Page, service: Replica, keys: dict[str, str], admin: httpx.Client
) -> None:
    admin.post("/v1/queues/mail/jobs", json={"type": "send", "payload": {"body": SCRIPT}})
    admin.post("/v1/queues/mail/jobs", json={"type": "send", "max_attempts": 1, "priority": 9})
    (failing,) = _lease(admin, "mail")  # the one with priority 9
    admin.post(
        f"/v1/leases/{failing['lease_id']}/fail",
        json={"error": {"type": "Bounce", "message": "mailbox full"}, "retryable": False},
    )
    admin.put(
        "/v1/schedules/digest",
        json={"queue": "mail", "type": "digest", "cron": "0 8 * * *"},
    )
    (running,) = _lease(admin, "mail")  # the script job is now running, held by ui-worker

    _sign_in(page, service, keys["read"])
    expect(page.locator("#who")).to_contain_text("read only")
    row = page.locator("tr", has=page.get_by_role("link", name="mail", exact=True))
    expect(row).to_contain_text("active")

    page.get_by_role("link", name="mail", exact=True).click()
    expect(page.get_by_role("heading", name="Queue mail")).to_be_visible()
    expect(page.get_by_text("mailbox full")).to_be_visible()  # the failed group
    page.get_by_role("button", name="week", exact=True).click()  # the chart's range
    expect(page).to_have_url(re.compile(r"#/queue/mail\?range=week$"))
    chart = page.get_by_role("img", name="throughput and backlog over the last week")
    expect(chart).to_be_visible()
    expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    expect(page.get_by_role("button", name="Redrive")).to_have_count(0)

    page.goto(f"{service.url}/ui/#/job/{running['job']['id']}")
    expect(page.get_by_role("heading", name=f"Job {running['job']['id']}")).to_be_visible()
    payload = page.locator("pre").first
    expect(payload).to_contain_text("<script>window.pwned = true</script>")
    assert page.evaluate("window.pwned") is None  # shown as text, never run
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    # the API refuses what the hidden button would do
    status = page.evaluate(
        """async (id) => (await fetch(`/v1/jobs/${id}/cancel`, {method: "POST",
              headers: {Authorization: `Bearer ${sessionStorage.getItem("jobq.apiKey")}`,
                        "Content-Type": "application/json"}, body: "{}"})).status""",
        running["job"]["id"],
    )
    assert status == 403

    page.get_by_role("link", name="Workers").click()
    expect(page.get_by_role("cell", name="ui-worker")).to_be_visible()
    page.get_by_role("link", name="Schedules").click()
    expect(page.get_by_role("cell", name="0 8 * * * UTC")).to_be_visible()
    # the key stays in this tab's session storage, never in the URL or a cookie
    assert keys["read"] not in page.url
    assert page.context.cookies() == []


def test_an_admin_acts_with_confirmations_and_sees_answers(
    page: Page, service: Replica, keys: dict[str, str], admin: httpx.Client
) -> None:
    # a job due tomorrow heads the unfiltered list: gone once the running filter applies
    admin.post("/v1/queues/work/jobs", json={"type": "t", "delay_seconds": 86400})
    for i in range(60):
        admin.post("/v1/queues/work/jobs", json={"type": "t", "payload": i})
    admin.post("/v1/queues/work/jobs", json={"type": "slow"})
    leases = _lease(admin, "work", 61)
    slow = next(x for x in leases if x["job"]["type"] == "slow")
    dialogs: list[str] = []

    def answer(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.accept()

    page.on("dialog", answer)
    # the page's clock stands still: the 2-s refresh runs only when the test moves it
    page.clock.install()
    page.clock.pause_at(time.time() * 1000 + 1000)
    _sign_in(page, service, keys["admin"])
    expect(page.locator("#who")).to_contain_text("admin")
    page.goto(f"{service.url}/ui/#/queue/work")
    expect(page.get_by_role("heading", name="Queue work")).to_be_visible()

    # filters and keyset paging
    expect(page.locator("tbody tr", has_text="queued")).to_have_count(1)
    page.get_by_label("state").select_option("running")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(f"{service.url}/ui/#/queue/work?state=running")
    # the filtered list has come (the unfiltered one's Next page would drop the filter)
    expect(page.locator("tbody tr", has_text="queued")).to_have_count(0)
    expect(page.locator("tbody tr", has_text="running").first).to_be_visible()
    page.get_by_role("button", name="Next page").click()
    expect(page).to_have_url(re.compile(r"/ui/#/queue/work\?state=running&after=\d+$"))
    expect(page.get_by_role("button", name="First page")).to_be_visible()

    # pause and resume
    page.get_by_role("button", name="Pause").click()
    expect(page.get_by_role("heading", name="Queue work paused")).to_be_visible()
    assert admin.get("/v1/queues/work").json()["paused"] is True
    page.get_by_role("button", name="Resume").click()
    expect(page.get_by_role("button", name="Pause")).to_be_visible()

    # a running job completes elsewhere: the next refresh shows it
    page.goto(f"{service.url}/ui/#/job/{slow['job']['id']}")
    expect(page.locator("h1")).to_contain_text("running")
    admin.post(f"/v1/leases/{slow['lease_id']}/complete", json={"result": {"ok": 1}})
    expect(page.locator("h1")).to_contain_text("running")  # no refresh yet
    page.clock.run_for(2500)
    expect(page.locator("h1")).to_contain_text("succeeded")

    # a refusal's reason is shown: deleting a job that started running meanwhile
    queued = admin.post("/v1/queues/late/jobs", json={"type": "t"}).json()
    page.goto(f"{service.url}/ui/#/job/{queued['id']}")
    # its own page first: the last job's (succeeded, with a Delete button too) lingers
    # until this one's answer comes, which, after the lease below, would have no Delete
    expect(page.locator("h1")).to_contain_text(f"Job {queued['id']} queued")
    expect(page.get_by_role("button", name="Delete")).to_be_visible()
    (held,) = _lease(admin, "late")
    assert held["job"]["id"] == queued["id"]  # it is running now: Delete must be refused
    page.get_by_role("button", name="Delete").click()
    expect(page.locator("#status")).to_contain_text("409 job_running")
    assert any(message == f"Delete job {queued['id']}?" for message in dialogs)

    # cancel, confirmed, on a queued job
    other = admin.post("/v1/queues/late/jobs", json={"type": "t"}).json()
    page.goto(f"{service.url}/ui/#/job/{other['id']}")
    # its own page first: the last job's page (running, with a Cancel button) may linger
    expect(page.locator("h1")).to_contain_text(f"Job {other['id']} queued")
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("h1")).to_contain_text("cancelled")
    assert admin.get(f"/v1/jobs/{other['id']}").json()["state"] == "cancelled"
    page.get_by_role("button", name="Retry").click()  # back to the queue
    expect(page.locator("h1")).to_contain_text("queued")

    # purge, confirmed: the queued jobs of `late` go
    page.goto(f"{service.url}/ui/#/queue/late")
    page.get_by_role("button", name="Purge queued jobs").click()
    expect(page.locator("#status")).to_contain_text("purge: done")
    assert admin.get("/v1/queues/late").json()["counts"]["queued"] == 0
    assert "Delete every queued job of late?" in dialogs

    # delete, confirmed: back to the job's queue, the outcome still shown there
    gone = admin.post("/v1/queues/bye/jobs", json={"type": "t"}).json()
    page.goto(f"{service.url}/ui/#/job/{gone['id']}")
    expect(page.locator("h1")).to_contain_text(f"Job {gone['id']} queued")
    page.get_by_role("button", name="Delete").click()
    expect(page).to_have_url(re.compile(r"#/queue/bye$"))
    expect(page.get_by_role("heading", name="Queue bye")).to_be_visible()
    expect(page.locator("#status")).to_contain_text("delete: done")
    assert admin.get(f"/v1/jobs/{gone['id']}").status_code == 404
    assert f"Delete job {gone['id']}?" in dialogs
    page.get_by_role("link", name="Queues", exact=True).click()  # a page the user opens
    expect(page.locator("#status")).to_be_hidden()

    # text in the idempotency key, and a time range
    for key in ("order-1", "order-2", "invoice-1"):
        admin.post("/v1/queues/keys/jobs", json={"type": "t", "idempotency_key": key})
    page.goto(f"{service.url}/ui/#/queue/keys")
    expect(page.locator("tbody tr", has_text="queued")).to_have_count(3)
    page.get_by_label("idempotency key contains").fill("order")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"key_contains=order"))
    expect(page.locator("tbody tr", has_text="queued")).to_have_count(2)
    page.get_by_label("created from").fill("2000-01-01T00:00")
    page.get_by_label("created before").fill("2000-01-02T00:00")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("tbody tr", has_text="queued")).to_have_count(0)

    # a failed group is redriven, confirmed
    admin.post("/v1/queues/redo/jobs", json={"type": "t", "max_attempts": 1})
    (doomed,) = _lease(admin, "redo")
    admin.post(
        f"/v1/leases/{doomed['lease_id']}/fail",
        json={"error": {"type": "Timeout", "message": "slow"}, "retryable": False},
    )
    page.goto(f"{service.url}/ui/#/queue/redo")
    page.get_by_role("button", name="Redrive", exact=True).click()
    expect(page.locator("#status")).to_contain_text("redrive: done")
    assert admin.get(f"/v1/jobs/{doomed['job']['id']}").json()["state"] == "queued"
    assert any("Timeout" in message for message in dialogs)


def test_the_pages_are_served_locally_with_strict_headers(service: Replica) -> None:
    home = httpx.get(f"{service.url}/", follow_redirects=False)
    assert home.status_code == 307 and home.headers["location"] == "/ui/"
    ui = httpx.get(f"{service.url}/ui/")
    assert "script-src 'self'" in ui.headers["content-security-policy"]
    assert ui.headers["x-frame-options"] == "DENY"
    docs = httpx.get(f"{service.url}/docs").text
    assert "/ui/swagger/swagger-ui-bundle.js" in docs and "cdn" not in docs.lower()
    started = time.monotonic()
    assert httpx.get(f"{service.url}/ui/swagger/swagger-ui-bundle.js").status_code == 200
    assert time.monotonic() - started < 5


def _execute(database_url: str, statement: str, *args: Any) -> None:
    """Run one statement on the tests' database, in a thread of its own: Playwright's
    sync API runs an event loop in this one."""

    async def run() -> None:
        conn = await asyncpg.connect(plain(database_url))
        try:
            await conn.execute(statement, *args)
        finally:
            await conn.close()

    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, run()).result()


def _run_schedule_now(database_url: str, name: str) -> None:
    """Its next tick two minutes ago: the scheduler's next pass makes the ticks since."""
    _execute(
        database_url,
        "UPDATE jobq.schedules SET next_tick = date_trunc('minute', now())"
        " - interval '2 minutes' WHERE name = $1",
        name,
    )


def _sql(database_url: str, *statements: str) -> None:
    """Run statements on the service's database, in a thread of its own (Playwright's sync
    API runs an event loop in this one)."""

    async def run() -> None:
        conn = await asyncpg.connect(plain(database_url))
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, run()).result()


def _links(cell: Any) -> list[tuple[str, str | None]]:
    """The (text, href) of each link in `cell`."""
    anchors = cell.locator("a")
    return [(a.inner_text(), a.get_attribute("href")) for a in anchors.all()]


def test_workers_and_schedules_show_their_jobs_as_links(
    page: Page, service: Replica, keys: dict[str, str], admin: httpx.Client, database_url: str
) -> None:
    for _ in range(2):
        admin.post("/v1/queues/links/jobs", json={"type": "t"})
    body = {"queues": ["links"], "max_jobs": 2, "worker_id": "link-worker"}
    held = sorted(
        lease["job"]["id"] for lease in admin.post("/v1/leases", json=body).json()["leases"]
    )
    assert len(held) == 2
    admin.put(
        "/v1/schedules/minutely",
        json={"queue": "links-cron", "type": "tick", "cron": "* * * * *", "catch_up": "all"},
    )
    _run_schedule_now(database_url, "minutely")
    deadline = time.monotonic() + 30
    runs: list[dict[str, Any]] = []
    while len(runs) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        runs = [r for r in admin.get("/v1/schedules/minutely").json()["recent_runs"] if r["job_id"]]
    assert len(runs) >= 2, runs
    made = [r["job_id"] for r in runs][:5]  # the page shows the last five, newest first

    page.clock.install()  # standing still: no refresh replaces a cell while it is read
    page.clock.pause_at(time.time() * 1000 + 1000)
    _sign_in(page, service, keys["read"])
    page.get_by_role("link", name="Workers").click()
    row = page.locator("tbody tr", has=page.get_by_role("cell", name="link-worker"))
    jobs = row.locator("td").last
    expect(jobs.locator("a")).to_have_count(2)
    assert _links(jobs) == [(str(i), f"#/job/{i}") for i in held]
    expect(jobs).to_have_text(f"{held[0]}, {held[1]}")

    page.get_by_role("link", name="Schedules").click()
    row = page.locator("tbody tr", has=page.get_by_role("cell", name="minutely"))
    last_jobs = row.locator("td").last
    expect(last_jobs.locator("a")).to_have_count(len(made))
    assert _links(last_jobs) == [(str(i), f"#/job/{i}") for i in made]
    last_jobs.get_by_role("link", name=str(made[0])).click()
    expect(page.get_by_role("heading", name=f"Job {made[0]}")).to_be_visible()


def _seen_long_ago(database_url: str, worker_id: str) -> None:
    """The worker last seen two minutes ago: past the gone interval (60 s)."""
    _execute(
        database_url,
        "UPDATE jobq.workers SET last_seen = now() - interval '2 minutes' WHERE worker_id = $1",
        worker_id,
    )


def test_the_workers_page_shows_idle_and_gone_workers_and_quiets_one(
    page: Page, service: Replica, keys: dict[str, str], admin: httpx.Client, database_url: str
) -> None:
    said = {"Jobq-Worker-Sdk": "jobq-client-python/1.2.3", "Jobq-Worker-Host": "box-7"}
    for worker_id in ("ui-idle", "ui-gone"):
        pinged = admin.post(
            f"/v1/workers/{worker_id}/presence",
            json={"queues": ["idle-q"], "types": ["send"]},
            headers=said,
        )
        assert pinged.status_code == 200, pinged.text
    deadline = time.monotonic() + 30
    listed: set[str] = set()
    while not {"ui-idle", "ui-gone"} <= listed and time.monotonic() < deadline:
        time.sleep(0.2)  # until the replica's flush wrote them
        listed = {w["worker_id"] for w in admin.get("/v1/workers").json()["workers"]}
    _seen_long_ago(database_url, "ui-gone")
    page.on("dialog", lambda dialog: dialog.accept())

    _sign_in(page, service, keys["admin"])
    page.get_by_role("link", name="Workers").click()
    idle = page.locator("tbody tr", has=page.get_by_role("cell", name="ui-idle", exact=True))
    for shown in ("live", "jobq-client-python 1.2.3", "box-7", "idle-q", "send"):
        expect(idle).to_contain_text(shown)
    gone = page.locator("tbody tr", has=page.get_by_role("cell", name="ui-gone", exact=True))
    expect(gone).to_contain_text("gone")
    expect(gone.get_by_role("button")).to_have_count(0)

    idle.get_by_role("button", name="Quiet").click()
    expect(page.locator("#status")).to_contain_text("quiet ui-idle: done")
    expect(idle.locator(".state-quiet")).to_have_text("quiet")
    (quiet,) = [
        w for w in admin.get("/v1/workers").json()["workers"] if w["worker_id"] == "ui-idle"
    ]
    assert quiet["quiet"] is True and quiet["quieted_by"] == "ui-admin"
    idle.get_by_role("button", name="Resume").click()
    expect(page.locator("#status")).to_contain_text("resume ui-idle: done")
    expect(idle.get_by_role("button", name="Quiet")).to_be_visible()


def _parse_address(text: str) -> str:
    if "@" not in text:
        raise ValueError(f"not an e-mail address: {text!r}")
    return text


def _python_traceback() -> str:
    """A real one, as the Python SDK sends in an error's details."""
    try:
        _parse_address("nobody")
    except ValueError as exc:
        return "".join(traceback.format_exception(exc))
    raise AssertionError("unreachable")


def test_a_python_traceback_reads_as_its_lines_under_the_error(
    page: Page, service: Replica, keys: dict[str, str], admin: httpx.Client
) -> None:
    trace = _python_traceback()
    admin.post("/v1/queues/trace/jobs", json={"type": "signup", "max_attempts": 1})
    (lease,) = _lease(admin, "trace")
    error = {
        "type": "ValueError",
        "message": "not an e-mail address: 'nobody'",
        "details": {"traceback": trace, "host": "worker-3"},
    }
    admin.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": error, "retryable": False})

    # the page's clock stands still: no refresh replaces what is read below
    page.clock.install()
    page.clock.pause_at(time.time() * 1000 + 1000)
    _sign_in(page, service, keys["read"])
    page.goto(f"{service.url}/ui/#/job/{lease['job']['id']}")
    expect(page.locator("h1")).to_contain_text("failed")
    last = page.locator(".last-error")
    expect(last.locator(".error-head")).to_have_text("ValueErrornot an e-mail address: 'nobody'")
    # the traceback as the lines it is, not one JSON string with \n in it
    shown = page.get_by_label("stack trace")
    expect(shown).to_be_visible()
    lines = shown.inner_text().splitlines()
    assert lines == trace.rstrip().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert len(lines) >= 5
    assert "\\n" not in last.inner_text()
    # what else the worker sent is still there, as JSON
    expect(last.locator("pre", has_text='"host": "worker-3"')).to_be_visible()
    # the error's message stays readable, above its traceback
    head = last.locator(".error-head").bounding_box()
    box = shown.bounding_box()
    assert head is not None and box is not None and head["y"] < box["y"]


def test_the_job_page_says_why_a_job_waits(
    page: Page, service: Replica, keys: dict[str, str], admin: httpx.Client
) -> None:
    parent = admin.post("/v1/queues/why/jobs", json={"type": "a"}).json()
    body = {"type": "b", "depends_on": [parent["id"]], "delay_seconds": 600}
    child = admin.post("/v1/queues/why/jobs", json=body).json()
    _sign_in(page, service, keys["read"])
    page.goto(f"{service.url}/ui/#/job/{child['id']}")
    reasons = page.get_by_label("reasons")
    expect(reasons.locator("li.blocking[data-code=scheduled]")).to_be_visible()
    waiting = reasons.locator("li.blocking[data-code=waiting_for_parents]")
    expect(waiting).to_contain_text(f"{parent['id']} queued")
    waiting.get_by_role("link", name=str(parent["id"])).click()
    expect(page.locator("h1")).to_contain_text(f"Job {parent['id']}")


def test_the_job_page_shows_its_lifecycle_controls(
    page: Page, service: Replica, keys: dict[str, str], admin: httpx.Client
) -> None:
    body = {
        "type": "digest",
        "timeout_seconds": 90,
        "start_by": "2099-01-01T00:00:00Z",
        "unique": {"key": "user-7", "period": 3600},
        "trace": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
    }
    made = admin.post("/v1/queues/lifecycle/jobs", json=body)
    assert made.status_code == 201, made.text
    job = made.json()
    (lease,) = _lease(admin, "lifecycle")
    snoozed = admin.post(f"/v1/leases/{lease['lease_id']}/snooze", json={"seconds": 600})
    assert snoozed.status_code == 200, snoozed.text
    _sign_in(page, service, keys["read"])
    page.goto(f"{service.url}/ui/#/job/{job['id']}")

    def row(name: str) -> Locator:
        return page.locator("table.kv tr", has=page.locator("th", has_text=name)).locator("td")

    expect(row("timeout")).to_have_text("90 s an attempt")
    expect(row("start by")).to_contain_text("2099-01-01")
    expect(row("snoozes")).to_have_text("1")
    expect(row("trace")).to_have_text("4bf92f3577b34da6a3ce929d0e0e4736")
    expect(row("unique")).to_contain_text("user-7, one per 3600 s from")
    expect(row("unique")).to_contain_text("while waiting / queued / running")


def test_a_key_that_cannot_read_is_refused_at_sign_in_with_the_reason(
    page: Page, service: Replica, keys: dict[str, str]
) -> None:
    page.clock.install()
    page.goto(f"{service.url}/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("API key").fill(keys["work"])
    page.get_by_role("button", name="Sign in").click()
    refusal = page.get_by_role("alert")
    expect(refusal).to_contain_text("lacks the 'read' scope")
    expect(refusal).to_contain_text("the dashboard needs a key with the read or admin scope")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.locator("#who")).not_to_contain_text("signed in")
    assert page.evaluate("sessionStorage.getItem('jobq.apiKey')") is None
    page.clock.run_for(2500)  # a refresh keeps the reason shown
    expect(refusal).to_contain_text("the read or admin scope")

    # a key the service does not know: its reason too
    page.get_by_label("API key").fill("jobq_nosuchkey_0123456789abcdef")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("The service refused this key")
    expect(page.get_by_role("alert")).not_to_contain_text("read or admin")

    # a read key after a refused one signs in
    page.get_by_label("API key").fill(keys["read"])
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Queues")).to_be_visible()
    expect(page.locator("#who")).to_contain_text("read only")
    expect(page.get_by_role("alert")).to_have_count(0)


def test_the_queues_table_is_whole_on_a_laptop_screen(
    page: Page, service: Replica, keys: dict[str, str], admin: httpx.Client
) -> None:
    # a queue with every limit, holding jobs back: the widest limits cell there is
    admin.put(
        "/v1/queues/limited/settings",
        json={
            "max_running": 20,
            "max_running_per_key": 1,
            "rate_limit": {"jobs": 1000, "per_seconds": 60},
        },
    )
    for i in range(6):
        admin.post(
            "/v1/queues/limited/jobs",
            json={"type": "t", "concurrency_key": f"customer-{i % 2}"},
        )
    _lease(admin, "limited", 6)
    # the page's clock stands still: no refresh replaces the table while it is measured
    page.clock.install()
    page.clock.pause_at(time.time() * 1000 + 1000)
    _sign_in(page, service, keys["read"])
    expect(page.locator("tr", has_text="limited")).to_contain_text("held back")
    for width in (1400, 1920, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        frame = page.locator(".scroll", has=page.get_by_role("columnheader", name="limits"))
        sizes = frame.evaluate("(e) => [e.scrollWidth, e.clientWidth]")
        assert 0 < sizes[0] <= sizes[1], (width, sizes)
        limits = page.get_by_role("columnheader", name="limits").bounding_box()
        assert limits is not None and limits["x"] + limits["width"] <= width, (width, limits)


def test_the_docs_share_the_dashboards_headers_and_still_work(service: Replica, page: Page) -> None:
    docs = httpx.get(f"{service.url}/docs")
    policy = docs.headers["content-security-policy"]
    assert "script-src 'self' 'sha256-" in policy and "frame-ancestors 'none'" in policy
    assert docs.headers["x-frame-options"] == "DENY"
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security" in m.text else None)
    page.goto(f"{service.url}/docs")
    expect(page.get_by_text("/v1/queues/{queue}/jobs").first).to_be_visible()
    assert refused == []


def test_the_audit_page_says_who_did_what_and_filters_by_key_and_action(
    page: Page, service: Replica, keys: dict[str, str], admin: httpx.Client
) -> None:
    headers = {"Authorization": f"Bearer {keys['read']}"}
    refused = httpx.post(f"{service.url}/v1/queues/audited/pause", headers=headers, timeout=30)
    assert refused.status_code == 403
    for action in ("pause", "resume"):
        assert admin.post(f"/v1/queues/audited/{action}").status_code == 200
    settings = admin.put("/v1/queues/audited/settings", json={"max_running": 2})
    assert settings.status_code == 200
    _sign_in(page, service, keys["admin"])
    page.get_by_role("link", name="Audit", exact=True).click()
    expect(page.get_by_role("heading", name="Audit log")).to_be_visible()
    rows = page.locator("tbody tr", has_text="audited")
    expect(rows.first).to_contain_text("setQueueSettings")  # the newest first
    expect(rows.first).to_contain_text('{"max_running":2}')
    expect(rows.first.get_by_role("link", name="audited")).to_have_attribute(
        "href", "#/queue/audited"
    )
    attempt = rows.filter(has_text="ui-read")
    expect(attempt).to_have_count(1)
    expect(attempt).to_contain_text("pauseQueue")
    expect(attempt.locator(".badge.refused")).to_have_text("403")

    page.get_by_label("key", exact=True).fill("ui-read")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(f"{service.url}/ui/#/audit?key=ui-read")
    expect(page.locator("tbody tr", has_text="pauseQueue").first).to_contain_text("ui-read")
    expect(page.locator("tbody tr").filter(has_not_text="ui-read")).to_have_count(0)
    page.get_by_label("key", exact=True).fill("")
    page.get_by_label("action", exact=True).fill("resumeQueue")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(f"{service.url}/ui/#/audit?action=resumeQueue")
    expect(page.locator("tbody tr", has_text="ui-admin").first).to_contain_text("resumeQueue")
    expect(page.locator("tbody tr", has_text="pauseQueue")).to_have_count(0)
    page.get_by_label("action", exact=True).fill("not an action")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_role("alert")).to_contain_text("action")

    # a read key reads every other page, not this one
    page.get_by_role("button", name="Sign out").click()
    _sign_in(page, service, keys["read"])
    page.goto(f"{service.url}/ui/#/audit")
    expect(page.get_by_role("alert")).to_contain_text("Only an admin key reads the audit log")


def test_a_pushed_queue_shows_its_deliveries_and_an_attempts_http_status(
    page: Page, service: Replica, keys: dict[str, str], admin: httpx.Client, database_url: str
) -> None:
    # what the dispatchers leave: a target, a minute of deliveries, an open breaker
    _sql(
        database_url,
        "INSERT INTO jobq.push_targets (queue, url, headers, timeout_seconds, secrets)"
        " VALUES ('pushed', 'https://hooks.example.com/in?sig=x', '{}', 5,"
        f" '{{{new_secret()}}}')",
        "INSERT INTO jobq.push_minutes (queue, minute, deliveries, classes, latency_buckets)"
        " VALUES ('pushed', date_trunc('minute', now()), 12,"
        ' \'{"2xx": 9, "retry_later": 1, "5xx": 2}\', \'{"10": 12}\')',
        "INSERT INTO jobq.delivery_breakers (target, failures, trips, open_until)"
        " VALUES ('queue:pushed', 5, 1, now() + interval '10 minutes')",
    )
    # an attempt failed as the dispatcher fails one on a 503 without Retry-After
    admin.post("/v1/queues/answers/jobs", json={"type": "hook", "max_attempts": 1})
    (lease,) = _lease(admin, "answers")
    error = {"type": "http_503", "message": "down", "details": {"status": 503}}
    admin.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": error, "retryable": False})

    _sign_in(page, service, keys["read"])
    page.goto(f"{service.url}/ui/#/queue/pushed")
    push = page.get_by_label("push deliveries")
    expect(push.locator("h2")).to_contain_text("Push deliveries to hooks.example.com")
    expect(push.locator("[data-breaker=open]")).to_contain_text("breaker open, reopens in")
    hour = push.locator("tr", has_text="last hour").locator("td")
    expect(hour).to_have_text(
        ["last hour", "12", "9", "0", "1", "0", "2", "0", "0", "0", "0", "27ms", "27ms"]
    )
    assert "sig=x" not in page.content()

    page.goto(f"{service.url}/ui/#/job/{lease['job']['id']}")
    attempt = page.locator("table", has=page.locator("th", has_text="HTTP")).locator("tbody td")
    expect(attempt.nth(5)).to_have_text("503")
