"""Schedules as the API shows them."""

from __future__ import annotations

from typing import Any

from app.schedules.service import Schedule


def schedule(found: Schedule) -> dict[str, Any]:
    """`ScheduleOut`."""
    row = found.row
    return {
        "name": row.name,
        "queue": row.queue,
        "type": row.type,
        "payload": row.payload,
        "cron": row.cron,
        "timezone": row.timezone,
        "priority": row.priority,
        "max_attempts": row.max_attempts,
        "lease_seconds": row.lease_seconds,
        "metadata": row.metadata,
        "paused": row.paused,
        "catch_up": row.catch_up,
        "catch_up_limit": row.catch_up_limit,
        "last_tick": row.last_tick,
        "next_runs": found.next_runs,
        "recent_runs": [
            {
                "tick": run.tick,
                "job_id": run.job_id,
                "job_state": run.job_state,
                "refused": run.refused,
            }
            for run in found.recent_runs
        ],
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def page(found: list[Schedule], limit: int) -> dict[str, Any]:
    """`SchedulesOut`: `next_after` when the page is full."""
    next_after = found[-1].row.name if len(found) == limit else None
    return {"schedules": [schedule(s) for s in found], "next_after": next_after}
