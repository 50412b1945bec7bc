"""A job sent back to the queue is reset alike whether it is retried alone (`retry_job`,
app/jobs/jobs.sql) or redriven with its queue's failed jobs (`redrive_failed`,
app/queues/queries.sql): the two domains' files cannot share a fragment, so the reset is
held equal here (a column one of them forgets would survive a retry)."""

from __future__ import annotations

import re

from app.jobs import repository as jobs
from app.queues import repository as queues


def _reset(sql: str) -> str:
    """The SET list's assignments from `attempt` on, parameters unnumbered, spaces folded."""
    start = sql.index("attempt = ")
    end = sql.index("updated_at = now()", start)
    return " ".join(re.sub(r"\$\d+", "$", sql[start:end]).split())


def test_a_retry_and_a_redrive_reset_the_same_columns_alike() -> None:
    retry = _reset(jobs.QUERIES["retry_job"].sql)
    redrive = _reset(queues.QUERIES["redrive_failed"].sql)
    assert retry == redrive
    assert "lease_id = NULL" in retry  # the list is found, not an empty match
