"""The loop shared by the maintenance services (reaper, pruner).

Each service does one pass in `run_once()`; this adds only the interval (±10 %
jitter, so replicas drift apart) and the logging of failures. Leadership is the
services' own business: every batch they run takes the maintenance advisory lock.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable

from app.core.errors import DatabaseUnavailable

INTERVAL_JITTER = 0.1
log = logging.getLogger("jobq.maintenance")


async def run_periodically(
    name: str, run_once: Callable[[], Awaitable[object]], interval_seconds: float
) -> None:
    """Run a pass, sleep an interval, repeat; a database outage only delays the next pass."""
    while True:
        try:
            await run_once()
        except DatabaseUnavailable:
            log.warning("%s: database unavailable, will retry", name)
        except Exception:
            log.exception("%s: pass failed", name)
        jitter = 1 + INTERVAL_JITTER * (2 * random.random() - 1)
        await asyncio.sleep(interval_seconds * jitter)
