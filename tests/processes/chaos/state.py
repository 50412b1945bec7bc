"""What a run holds while it goes: the processes it started, the faults, the probes."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from tests.processes.chaos import (
    Api,
    EventLog,
)
from tests.processes.chaos.databases import Database, Db
from tests.processes.chaos.options import Options
from tests.processes.chaos.procs import Client, Exit, Fault, Probe, Service

if TYPE_CHECKING:
    from tests.processes.chaos.fair import FairLoad
    from tests.processes.chaos.lifecycle import LifecycleLoad
    from tests.processes.chaos.limited import LimitedLoad
    from tests.processes.chaos.push import PushLoad
    from tests.processes.chaos.workflows import WorkflowLoad


class RunState:
    """Everything one fault-injection run starts, does and sees: its processes, faults, probes."""

    def __init__(self, opts: Options, run_dir: Path) -> None:
        self.opts = opts
        self.run_dir = run_dir
        self.rng = random.Random(opts.seed)
        self.database: Database | None = None
        self.db: Db | None = None
        self.services: list[Service] = []
        self.workers: list[Client] = []
        self.producers: list[Client] = []
        self.faults: list[Fault] = []
        self.probes: list[Probe] = []
        self.stray_exits: list[Exit] = []
        self.killed_pids: set[int] = set()
        self.api_view: dict[int, tuple[str, int, int]] = {}
        self.stale_keys: list[str] = []
        self.flows: WorkflowLoad | None = None
        self.limited: LimitedLoad | None = None
        self.lifecycle: LifecycleLoad | None = None
        self.fair: FairLoad | None = None
        self.push: PushLoad | None = None
        self.side_ids: set[int] = set()  # the side loads' jobs (not in `Evidence.jobs`)
        self.began = time.time()
        self.load_began = 0.0
        self.load_ended = 0.0
        self.finished = False
        for sub in ("logs", "events"):
            (run_dir / sub).mkdir(parents=True, exist_ok=True)
        self.events = EventLog(run_dir / "events" / "harness.jsonl")
        # the producers' last chunks wait for it: made when the PostgreSQL restart is over
        self.producers_gate = run_dir / "postgres-restarted"
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(15.0, connect=2.0))
        self.api: Api | None = None

    def elapsed(self) -> str:
        return f"[{time.time() - self.load_began:6.1f}s]" if self.load_began else "[ setup]"

    def api_client(self) -> Api:
        assert self.api is not None
        return self.api
