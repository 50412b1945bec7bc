"""The benchmark's floor answering whole jobs answers in jobq's own shapes."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from app.jobs.schemas import AckResult, JobOut, LeaseOut
from bench import floor_whole


def _row(**changes: Any) -> dict[str, Any]:
    """A leased row of the wide table as the floor's asyncpg pool reads it (jsonb: text)."""
    now = datetime.now(UTC)
    row: dict[str, Any] = {
        "id": 7,
        "queue": "q",
        "type": "bench",
        "payload": '{"i": 7}',
        "priority": 0,
        "state": "running",
        "run_at": now,
        "attempt": 1,
        "max_attempts": 5,
        "lease_seconds": 60,
        "lease_id": uuid.uuid4(),
        "lease_expires_at": now,
        "current_lease_seconds": None,
        "worker_id": "w",
        "attempted_at": now,
        "cancel_requested": False,
        "progress_percent": None,
        "progress_stage": None,
        "progress_message": None,
        "progress_updated_at": None,
        "result": None,
        "last_error": None,
        "attempts": "[]",
        "idempotency_key": None,
        "metadata": "{}",
        "created_at": now,
        "started_at": now,
        "finished_at": None,
        "updated_at": now,
        "lease_key_id": None,
        "waiting_for": 0,
        "has_parents": False,
        "has_dependents": False,
        "run_on_parent_failure": False,
        "notify_finish": False,
        "concurrency_key": None,
    }
    return {**row, **changes}


def test_a_lease_is_jobqs_lease_with_the_whole_job_in_its_field_order() -> None:
    row = _row()
    lease = floor_whole.lease(row)  # type: ignore[arg-type]  # a Record reads the same
    assert list(lease["job"]) == list(JobOut.model_fields)
    parsed = LeaseOut.model_validate(lease)
    assert parsed.job.payload == {"i": 7}
    assert parsed.job.metadata == {} and parsed.job.attempts == []
    assert floor_whole.token(lease["lease_id"]) == (7, row["lease_id"].hex)


def test_a_finished_job_and_an_ack_result_are_jobqs() -> None:
    job = floor_whole.job(_row(state="succeeded", result=json.dumps({"ok": True})))  # type: ignore[arg-type]
    assert JobOut.model_validate(job).result == {"ok": True}
    assert AckResult.model_validate(floor_whole.ack_result("7-ab", 7, applied=True)).status == 200
    refused = AckResult.model_validate(floor_whole.ack_result("7-ab", 7, applied=False))
    assert (refused.status, refused.state) == (409, None)
