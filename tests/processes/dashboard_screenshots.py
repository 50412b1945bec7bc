"""Screenshots of the dashboard for the README and the docs: `make screenshots`.

    python -m tests.processes.dashboard_screenshots [OUTPUT_DIR]

Starts `jobq serve` on a database of its own (`JOBQ_DATABASE_URL`'s server, else the
embedded one), fills it with a little of everything, and photographs the main pages at
1280 px, and the queues page at 390 px (a phone), with Debian's Chromium.
"""

from __future__ import annotations

import asyncio
import os
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


def _fill(api: httpx.Client) -> int:
    """Queues with a little of everything; the id of a job worth a look."""
    api.put("/v1/queues/video/settings", json={"max_running": 4})
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
    api.post("/v1/queues/reports/jobs", json={"type": "daily", "delay_seconds": 3600})
    leases = api.post(
        "/v1/leases", json={"queues": ["emails"], "max_jobs": 12, "worker_id": "mailer-1"}
    ).json()["leases"]
    for lease in leases[:6]:
        api.post(f"/v1/leases/{lease['lease_id']}/complete", json={"result": {"sent": True}})
    for lease in leases[6:9]:
        api.post(
            f"/v1/leases/{lease['lease_id']}/fail",
            json={"error": {"type": "SMTPError", "message": "mailbox full"}, "retryable": False},
        )
    video = api.post(
        "/v1/leases", json={"queues": ["video"], "max_jobs": 8, "worker_id": "gpu-7"}
    ).json()["leases"]
    for n, lease in enumerate(video):
        api.post(
            f"/v1/leases/{lease['lease_id']}/heartbeat",
            json={"progress": {"percent": 20.0 * (n + 1), "stage": "encode", "message": "1080p"}},
        )
    api.put(
        "/v1/schedules/daily-report",
        json={
            "queue": "reports",
            "type": "daily",
            "cron": "0 7 * * 1-5",
            "timezone": "Europe/Paris",
        },
    )
    job_id: int = video[0]["job"]["id"]
    return job_id


def _shoot(page: Page, url: str, path: Path, heading: str) -> None:
    page.goto(url)
    page.get_by_role("heading", name=heading).wait_for()
    time.sleep(0.3)
    page.screenshot(path=str(path), full_page=True)


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else REPO / "docs" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    server = os.environ.get("JOBQ_DATABASE_URL") or embedded.start(Settings().data_dir)
    url = asyncio.run(_fresh(server))
    replica = Replica(url, Path(tempfile.mkdtemp()) / "serve.log")
    try:
        with httpx.Client(base_url=replica.url, timeout=30) as api:
            job_id = _fill(api)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            wide = browser.new_page(viewport={"width": 1280, "height": 800})
            base = f"{replica.url}/ui/#"
            _shoot(wide, f"{base}/", out / "queues.png", "Queues")
            _shoot(wide, f"{base}/queue/emails", out / "queue.png", "Queue emails")
            _shoot(wide, f"{base}/job/{job_id}", out / "job.png", f"Job {job_id}")
            _shoot(wide, f"{base}/workers", out / "workers.png", "Workers")
            phone = browser.new_page(viewport={"width": 390, "height": 844})
            _shoot(phone, f"{base}/", out / "queues-phone.png", "Queues")
            browser.close()
    finally:
        replica.stop()
    print(f"screenshots in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
