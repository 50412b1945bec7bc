"""Why a lease transition matched no running job, read from the job's recorded history:
never issued (404), another key's (403), superseded or finished differently (409; its
attempt timed out: 409 `execution_timeout`), or a repeat of the same finishing call
(no error: the same outcome again)."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from app.core.errors import (
    ExecutionTimeout,
    JobqError,
    LeaseForbidden,
    LeaseLost,
    LeaseNotFound,
)
from app.jobs.rows import JobRow

Outcome = Literal["complete", "fail"]
_OUTCOME_RECORD = {"complete": "succeeded", "fail": "failed"}


def may_hold(owner: int | None, key_id: int | None) -> bool:
    """May the caller's key (`key_id`; None: authentication is off) act on a lease taken
    with `owner`? Its own leases, and those taken with no key (push delivery's, or while
    authentication was off: their lease id is the credential). The SQL of finish.sql
    says the same in each statement's `WHERE`."""
    return key_id is None or owner is None or owner == key_id


def explain_stale(
    job: JobRow | None, lease: UUID, outcome: Outcome | None, key_id: int | None = None
) -> JobqError | None:
    """Why a lease matched no running job: None means "a repeat of what already happened".

    A lease taken with another API key than `key_id` is refused whatever became of it,
    and says nothing about the job.
    """
    if job is None:
        return LeaseNotFound("no lease with this id was ever issued")
    record = next((a for a in reversed(job.history) if a.get("lease_id") == str(lease)), None)
    if record is None and str(job.lease_id) != str(lease):
        return LeaseNotFound("no lease with this id was ever issued")
    owner = record.get("key_id") if record is not None else job.lease_key_id
    if not may_hold(owner, key_id):
        return LeaseForbidden("this lease was taken with another API key")
    if record is not None and outcome is not None and record["outcome"] == _OUTCOME_RECORD[outcome]:
        return None
    # Still this lease's, running: only its attempt's timeout (past, not yet reaped)
    # refuses it; or ended by the reaper at that timeout.
    if (record is None and job.state == "running" and job.timeout_seconds is not None) or (
        record is not None and record["outcome"] == "timeout"
    ):
        return ExecutionTimeout(
            f"this attempt ran past the job's timeout of {job.timeout_seconds} s; "
            f"the job is now {job.state}",
            job_id=job.id,
            state=job.state,
            timeout_seconds=job.timeout_seconds,
        )
    ended = f"ended as {record['outcome']}" if record is not None else "is no longer running"
    return LeaseLost(
        f"this lease {ended}; the job is now {job.state}", job_id=job.id, state=job.state
    )
