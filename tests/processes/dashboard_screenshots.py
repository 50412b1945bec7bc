"""Screenshots of the dashboard for the README and the docs: `make screenshots`.

    python -m tests.processes.dashboard_screenshots [OUTPUT_DIR]

Starts `jobq serve` on a database of its own (`JOBQ_DATABASE_URL`'s server, else the
embedded one), fills it with a little of everything (the last hour's traffic moved back
in time by SQL), and photographs the main pages at 1280 px, and the queues page at 390 px
(a phone), with Debian's Chromium.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import httpx
from playwright.sync_api import Page, sync_playwright

from app.core.config import Settings
from app.db import embedded
from app.db.embedded import quote_ident
from app.db.migrate import upgrade
from app.db.url import with_database
from tests.processes.replicas import REPO, Replica

DATABASE = "jobq_screenshots"
CHROMIUM = os.environ.get("JOBQ_CHROMIUM", "/usr/bin/chromium")
RANDOM = random.Random(44)  # the same pictures each time, but for the clock


async def _fresh(server_url: str) -> str:
    conn = await asyncpg.connect(with_database(server_url, "postgres").replace("+asyncpg", ""))
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {quote_ident(DATABASE)} WITH (FORCE)")
        await conn.execute(f"CREATE DATABASE {quote_ident(DATABASE)}")
    finally:
        await conn.close()
    url = with_database(server_url, DATABASE)
    await upgrade(url)
    return url


# What a Python worker's failure looks like (its SDK sends the traceback in the details)
TRACEBACK = """Traceback (most recent call last):
  File "/srv/mailer/tasks.py", line 48, in send_welcome
    smtp.send_message(message)
  File "/usr/lib/python3.11/smtplib.py", line 986, in send_message
    return self.sendmail(from_addr, to_addrs, flatmsg, mail_options,
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/lib/python3.11/smtplib.py", line 901, in sendmail
    raise SMTPRecipientsRefused(senderrs)
smtplib.SMTPRecipientsRefused: {'u7@example.com': (552, b'5.2.2 Mailbox full')}
"""

# The last hour's traffic: (queue, type, jobs, share failed); each job is put back to a
# minute of the hour, more of them at its busiest.
HISTORY = [
    ("emails", "welcome", 420, 0.03),
    ("video", "transcode", 70, 0.0),
    ("webhooks", "deliver", 180, 0.06),
]


def _history(api: httpx.Client) -> dict[int, str]:
    """Jobs run and finished now, to be moved back into the last hour: id → queue."""
    made: dict[int, str] = {}
    for queue, kind, count, failing in HISTORY:
        jobs = [{"type": kind, "payload": {"n": i}, "max_attempts": 1} for i in range(count)]
        api.post(f"/v1/queues/{queue}/jobs/batch", json={"jobs": jobs})
        done = 0
        while done < count:
            body = {"queues": [queue], "max_jobs": 100, "worker_id": f"{queue}-old"}
            leases = api.post("/v1/leases", json=body).json()["leases"]
            acks = []
            for lease in leases:
                made[lease["job"]["id"]] = queue
                ack: dict[str, object] = {"lease_id": lease["lease_id"], "outcome": "complete"}
                if RANDOM.random() < failing:
                    error = {"type": "HTTPError", "message": "502 Bad Gateway"}
                    ack = {**ack, "outcome": "fail", "error": error, "retryable": False}
                acks.append(ack)
            api.post("/v1/acks", json={"acks": acks})
            done += len(leases)
    return made


async def _backdate(url: str, jobs: dict[int, str]) -> None:
    """Spread `jobs` over the last hour, with plausible waits and run times."""
    rows = []
    for queue, *_ in HISTORY:
        ids = sorted(job_id for job_id, its in jobs.items() if its == queue)
        # the busiest half an hour ago; a queue's older jobs have the smaller ids
        ages = sorted(
            (
                min(
                    59.0,
                    abs(RANDOM.gauss(30, 12)) if RANDOM.random() < 0.6 else RANDOM.random() * 60,
                )
                for _ in ids
            ),
            reverse=True,
        )
        for job_id, minutes in zip(ids, ages, strict=True):
            wait = RANDOM.lognormvariate(-1.5, 0.8)
            run = RANDOM.lognormvariate(-0.5 if queue != "video" else 2.5, 0.5)
            rows.append((job_id, minutes * 60 + 30, wait, run))
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        await conn.executemany(
            """UPDATE jobq.jobs
                  SET created_at = now() - make_interval(secs => $2),
                      run_at = now() - make_interval(secs => $2),
                      started_at = now() - make_interval(secs => $2 - $3),
                      attempted_at = now() - make_interval(secs => $2 - $3),
                      finished_at = now() - make_interval(secs => $2 - $3 - $4),
                      updated_at = now() - make_interval(secs => $2 - $3 - $4)
                WHERE id = $1""",
            rows,
        )
    finally:
        await conn.close()


def _fill(api: httpx.Client) -> tuple[int, int]:
    """Queues with a little of everything: (a running job, a failed job) worth a look."""
    api.put("/v1/queues/video/settings", json={"max_running": 4})
    api.put(
        "/v1/queues/emails/settings",
        json={"rate_limit": {"jobs": 600, "per_seconds": 60}, "max_running": 50},
    )
    api.put("/v1/queues/webhooks/settings", json={"max_running_per_key": 1})
    for i in range(40):
        api.post(
            "/v1/queues/emails/jobs",
            json={"type": "welcome", "payload": {"to": f"u{i}@example.com"}},
        )
    for i in range(12):
        api.post(
            "/v1/queues/video/jobs",
            json={"type": "transcode", "payload": {"file": f"clip-{i}.mp4"}},
        )
    for i in range(9):
        api.post(
            "/v1/queues/webhooks/jobs",
            json={
                "type": "deliver",
                "payload": {"event": "invoice.paid", "n": i},
                "concurrency_key": f"customer-{i % 3}",
            },
        )
    api.post("/v1/queues/reports/jobs", json={"type": "daily", "delay_seconds": 3600})
    leases = api.post(
        "/v1/leases", json={"queues": ["emails"], "max_jobs": 12, "worker_id": "mailer-1"}
    ).json()["leases"]
    for lease in leases[:6]:
        api.post(f"/v1/leases/{lease['lease_id']}/complete", json={"result": {"sent": True}})
    for n, lease in enumerate(leases[6:9]):
        address = lease["job"]["payload"]["to"]
        error = {
            "type": "SMTPRecipientsRefused",
            "message": f"{{'{address}': (552, b'5.2.2 Mailbox full')}}",
            "details": {
                "traceback": TRACEBACK.replace("u7@example.com", address),
                "smtp_code": 552,
            },
        }
        if n:
            error = {"type": "SMTPServerDisconnected", "message": "Connection unexpectedly closed"}
        api.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": error, "retryable": False})
    failed: int = leases[6]["job"]["id"]
    api.post("/v1/leases", json={"queues": ["webhooks"], "max_jobs": 9, "worker_id": "hooks-2"})
    video = api.post(
        "/v1/leases", json={"queues": ["video"], "max_jobs": 8, "worker_id": "gpu-7"}
    ).json()["leases"]
    for n, lease in enumerate(video):
        api.post(
            f"/v1/leases/{lease['lease_id']}/heartbeat",
            json={"progress": {"percent": 20.0 * (n + 1), "stage": "encode", "message": "1080p"}},
        )
    schedules = {
        "daily-report": {
            "queue": "reports",
            "type": "daily",
            "cron": "0 7 * * 1-5",
            "timezone": "Europe/Paris",
        },
        "hourly-digest": {
            "queue": "emails",
            "type": "digest",
            "cron": "0 * * * *",
            "catch_up": "all",
        },
        "cleanup": {
            "queue": "reports",
            "type": "cleanup",
            "cron": "*/15 * * * *",
            "catch_up": "all",
        },
    }
    for name, schedule in schedules.items():
        api.put(f"/v1/schedules/{name}", json=schedule)
    running: int = video[0]["job"]["id"]
    return running, failed


async def _schedules_ran(url: str) -> None:
    """The schedules' next ticks put back: the scheduler's next pass makes the missed ones."""
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        await conn.execute(
            "UPDATE jobq.schedules SET next_tick = date_trunc('hour', now()) - CASE name"
            " WHEN 'hourly-digest' THEN interval '4 hours' ELSE interval '45 minutes' END"
            " WHERE name IN ('hourly-digest', 'cleanup')"
        )
    finally:
        await conn.close()


def _ran(api: httpx.Client, name: str) -> None:
    """Until the scheduler has made the schedule's missed ticks."""
    deadline = time.monotonic() + 30
    while not api.get(f"/v1/schedules/{name}").json()["recent_runs"]:
        assert time.monotonic() < deadline, f"the schedule {name} made no job"
        time.sleep(0.2)


def _shoot(page: Page, url: str, path: Path, heading: str, *, whole: bool = True) -> None:
    """The page at `url` once `heading` shows: all of it, or (`whole` false) its top."""
    page.goto(url)
    page.get_by_role("heading", name=heading).wait_for()
    time.sleep(0.3)
    page.screenshot(path=str(path), full_page=whole)


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else REPO / "docs" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    server = os.environ.get("JOBQ_DATABASE_URL") or embedded.start(Settings().data_dir)
    url = asyncio.run(_fresh(server))
    replica = Replica(url, Path(tempfile.mkdtemp()) / "serve.log")
    try:
        with httpx.Client(base_url=replica.url, timeout=30) as api:
            asyncio.run(_backdate(url, _history(api)))
            running, failed = _fill(api)
            asyncio.run(_schedules_ran(url))
            for name in ("hourly-digest", "cleanup"):
                _ran(api, name)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            wide = browser.new_page(viewport={"width": 1280, "height": 800})
            base = f"{replica.url}/ui/#"
            _shoot(wide, f"{base}/", out / "queues.png", "Queues")
            tall = browser.new_page(viewport={"width": 1280, "height": 1100})
            # its top: the figures, chart, failed groups and the first jobs of 50
            _shoot(tall, f"{base}/queue/emails", out / "queue.png", "Queue emails", whole=False)
            _shoot(wide, f"{base}/job/{running}", out / "job.png", f"Job {running}")
            _shoot(wide, f"{base}/job/{failed}", out / "job-failed.png", f"Job {failed}")
            _shoot(wide, f"{base}/workers", out / "workers.png", "Workers")
            _shoot(wide, f"{base}/schedules", out / "schedules.png", "Schedules")
            phone = browser.new_page(viewport={"width": 390, "height": 844})
            _shoot(phone, f"{base}/", out / "queues-phone.png", "Queues")
            browser.close()
    finally:
        replica.stop()
    print(f"screenshots in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
