"""One URL setting for the sync and the async store: mapping between driver flavours.

A service configures one URL, often with an asyncio driver in it
(``sqlite+aiosqlite://…``, ``postgresql+asyncpg://…``, ``postgresql+psycopg_async://…``).
Alembic, the CLI and :class:`~hermes_store.SessionDB` are synchronous, so they map such
a URL to the sync driver for the same database; :mod:`hermes_store.aio` maps the other
way. Only the driver part changes: host, database, credentials and query stay as given.
"""

from __future__ import annotations

from sqlalchemy.engine import URL

# (backend, async driver) -> the sync drivername for the same database.
_TO_SYNC = {
    ("sqlite", "aiosqlite"): "sqlite",
    ("postgresql", "asyncpg"): "postgresql+psycopg",
    ("postgresql", "psycopg_async"): "postgresql+psycopg",
}
# backend -> the asyncio drivername used when the URL names a sync driver (or none).
_TO_ASYNC = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+psycopg_async"}
ASYNC_DRIVERS = frozenset(driver for _backend, driver in _TO_SYNC)


def _backend_and_driver(url: URL) -> tuple[str, str]:
    # From the URL's text: URL.get_driver_name() loads the dialect when no driver is
    # named, which fails for a backend SQLAlchemy does not know (reported elsewhere).
    backend, _, driver = url.drivername.partition("+")
    return backend, driver


def is_async_url(url: URL) -> bool:
    """True when ``url`` names an asyncio driver (aiosqlite, asyncpg, psycopg_async)."""
    return _backend_and_driver(url) in _TO_SYNC


def sync_driver_url(url: URL) -> URL:
    """``url`` with an asyncio driver replaced by the sync driver for the same database."""
    drivername = _TO_SYNC.get(_backend_and_driver(url))
    return url if drivername is None else url.set(drivername=drivername)


def async_driver_url(url: URL) -> URL:
    """``url`` with a sync driver replaced by the asyncio driver hermes_store.aio uses.

    An asyncio driver already named (``asyncpg``, ``aiosqlite``, ``psycopg_async``) is
    kept. Backends without an asyncio driver mapping raise ``ValueError``.
    """
    if is_async_url(url):
        return url
    drivername = _TO_ASYNC.get(url.get_backend_name())
    if drivername is None:
        raise ValueError(f"no asyncio driver is known for {url.get_backend_name()!r} URLs")
    return url.set(drivername=drivername)
