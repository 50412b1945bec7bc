"""`jobq config`: the configuration in force, where each value comes from, secrets masked.

Every value is read as `jobq serve` and the other commands read it: the `JOBQ_`
environment variables of the one settings class, else the default. The service URL and
the API key are the ones the operator commands' SDK client resolves.
"""

from __future__ import annotations

import os
from typing import Any

import typer
from pydantic import SecretStr

from app.cli._output import console, print_json, table
from app.cli._service import Session, settings
from app.core.config import Settings
from app.db.url import redacted

ENV_PREFIX = "JOBQ_"


def _masked_key(key: str | None) -> str | None:
    """An API key as its public prefix (`jobq_<lookup id>_…`): enough to tell keys apart."""
    if key is None:
        return None
    head, sep, _ = key.rpartition("_")
    return f"{head}{sep}…" if head.startswith("jobq_") else "…"


def _shown(name: str, value: Any) -> Any:
    if isinstance(value, SecretStr):
        return _masked_key(value.get_secret_value())
    if name in ("database_url", "database_direct_url") and value:
        return redacted(value)
    return str(value) if not isinstance(value, int | float | bool | type(None)) else value


def entries(config: Settings, session: Session) -> list[Any]:
    """(setting, value shown, where it came from) for every setting, then the service
    URL and the key the operator commands use."""
    rows: list[Any] = []
    for name in Settings.model_fields:
        variable = ENV_PREFIX + name.upper()
        source = variable if variable in os.environ else "default"
        rows.append((name, _shown(name, getattr(config, name)), source))
    if session.url:
        where = "--url"
    elif config.url:
        where = "JOBQ_URL"
    else:
        where = "JOBQ_HOST and JOBQ_PORT"
    rows.append(("service url (in use)", session.jobq.base_url, where))
    key = "--api-key" if session.api_key else ("JOBQ_API_KEY" if config.api_key else "none")
    rows.append(("api key (in use)", _masked_key(session.jobq.api_key), key))
    return rows


def config(ctx: typer.Context) -> None:
    """The configuration in force, and where each value comes from.

    Secrets are masked.
    """
    session = Session.of(ctx)
    rows = entries(settings(), session)
    if session.as_json:
        print_json({name: {"value": value, "source": source} for name, value, source in rows})
        return
    shown = table(None, [("setting", "key"), ("value", "text"), ("from", "key")])
    for name, value, source in rows:
        shown.add_row(name, "-" if value is None else str(value), source)
    console().print(shown)
