"""The audit log: who did which admin action when, and how it ended (`jobq.audit_log`),
written as each admin route answers (the capture is `app.keys.audit`), read with
`GET /v1/audit`, and pruned after its own retention by the maintenance leader. The rest
of jobq uses this package through the names below."""

from app.audit.repository import AuditRepository
from app.audit.routes import router
from app.audit.service import AuditFilter, AuditLog, AuditPruner

__all__ = ["AuditFilter", "AuditLog", "AuditPruner", "AuditRepository", "router"]
