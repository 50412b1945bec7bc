"""prometheus-client's multiprocess mode as jobq uses it: a forked child counts in a file
of its own, and the parent's counts stay in its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Counts 100 in the parent, 5 in a forked child, then 1 more in the parent; prints the
# files the processes wrote and the sum a scrape reads from them.
SCRIPT = textwrap.dedent(
    """
    import os
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector
    from app.core import metrics

    for _ in range(100):
        metrics.EMPTY_LEASES.inc()
    child = os.fork()
    if child == 0:
        metrics.EMPTY_LEASES.inc(5)
        os._exit(0)
    os.waitpid(child, 0)
    metrics.EMPTY_LEASES.inc()
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    total = registry.get_sample_value("jobq_lease_empty_polls_total")
    print(os.getpid(), child, total)
    """
)


def test_a_forked_child_counts_in_its_own_file(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    parent, child, total = done.stdout.split()
    assert float(total) == 106  # a child writing in its parent's file would leave 101
    assert {p.name for p in tmp_path.glob("counter_*.db")} == {
        f"counter_{parent}.db",
        f"counter_{child}.db",
    }
