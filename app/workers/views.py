"""The workers' answers, shaped from their rows."""

from __future__ import annotations

from typing import Any

from app.workers.rows import QuietRow, WorkerRow


def worker(row: WorkerRow) -> dict[str, Any]:
    shown = row._asdict()
    shown["status"] = "gone" if shown.pop("gone") else "live"
    return shown


def page(rows: list[WorkerRow], limit: int) -> dict[str, Any]:
    return {
        "workers": [worker(row) for row in rows],
        "next_after": rows[-1].worker_id if len(rows) == limit else None,
    }


def quiet(row: QuietRow) -> dict[str, Any]:
    return row._asdict()
