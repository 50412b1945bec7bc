"""Workers: every worker that called lately, idle or busy (its presence, kept in each
replica's memory and written every `JOBQ_WORKER_FLUSH_SECONDS`), what it serves, its
throughput, and quiet: an admin asks one to lease no more. The rest of jobq uses this
package through the names below."""

from app.workers.repository import WorkersRepository
from app.workers.routes import router
from app.workers.schemas import QUIET_HEADER, HostHeader, SdkHeader, WorkerHeader
from app.workers.service import Presence, Workers, WorkersPruner

__all__ = [
    "QUIET_HEADER",
    "HostHeader",
    "Presence",
    "SdkHeader",
    "WorkerHeader",
    "Workers",
    "WorkersPruner",
    "WorkersRepository",
    "router",
]
