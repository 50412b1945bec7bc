"""Database URLs: users write `postgresql://…`; SQLAlchemy wants its driver named."""

from __future__ import annotations

from sqlalchemy.engine import URL, make_url

ASYNC_DRIVER = "postgresql+asyncpg"


def async_url(url: str) -> URL:
    """The URL with the asyncpg driver, whatever scheme the user wrote."""
    parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    return parsed.set(drivername=ASYNC_DRIVER)


def with_database(url: str, database: str) -> str:
    """The same server, another database."""
    return async_url(url).set(database=database).render_as_string(hide_password=False)


def redacted(url: str) -> str:
    """The URL with its password hidden, for logs and messages."""
    return async_url(url).render_as_string(hide_password=True)
