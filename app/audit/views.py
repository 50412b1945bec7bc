"""The audit log as the API shows it."""

from __future__ import annotations

from typing import Any

from app.audit.rows import AuditRow


def entry(row: AuditRow) -> dict[str, Any]:
    """`AuditEntryOut`."""
    shown = row._asdict()
    shown["key"] = shown.pop("key_name")
    return shown


def page(rows: list[AuditRow], limit: int) -> dict[str, Any]:
    """`AuditPage`: `next_before` when the page is full."""
    next_before = rows[-1].id if len(rows) == limit else None
    return {"entries": [entry(row) for row in rows], "next_before": next_before}
