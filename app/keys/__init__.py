"""API keys: who is calling, and what each key may do.

The rest of jobq uses this package through the names below: the access every route
declares (`EnqueueCaller`, … `PUBLIC`, `PROBE`), the `Caller` it gets, the middleware
that refuses a body without a key, and what `main` and the CLI wire together.
"""

from app.keys.access import (
    PROBE,
    PUBLIC,
    Access,
    AdminCaller,
    Anyone,
    EnqueueCaller,
    LocalOrAnyKey,
    ReadCaller,
    WorkCaller,
    access_of,
    declared_access,
    document_keys,
    framework_paths,
    scope_table,
    served_routes,
)
from app.keys.audit import AdminAction, Trail, is_admin_action
from app.keys.authenticator import (
    Authenticator,
    AuthRequired,
    is_loopback,
    open_network_refusal,
)
from app.keys.caller import Caller, QueueRule
from app.keys.gate import KeyGate
from app.keys.repository import KeysRepository
from app.keys.routes import router
from app.keys.routing import KeyedRoute
from app.keys.rows import KeyRow
from app.keys.scopes import SCOPES, Scope
from app.keys.service import KEY_PREFIX, Keys, mint
from app.keys.views import key as key_view

__all__ = [
    "KEY_PREFIX",
    "PROBE",
    "PUBLIC",
    "SCOPES",
    "Access",
    "AdminAction",
    "AdminCaller",
    "Anyone",
    "AuthRequired",
    "Authenticator",
    "Caller",
    "EnqueueCaller",
    "KeyGate",
    "KeyRow",
    "KeyedRoute",
    "Keys",
    "KeysRepository",
    "LocalOrAnyKey",
    "QueueRule",
    "ReadCaller",
    "Scope",
    "Trail",
    "WorkCaller",
    "access_of",
    "declared_access",
    "document_keys",
    "framework_paths",
    "is_admin_action",
    "is_loopback",
    "key_view",
    "mint",
    "open_network_refusal",
    "router",
    "scope_table",
    "served_routes",
]
