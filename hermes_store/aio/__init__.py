"""hermes_store for asyncio services: :class:`AsyncSessionDB` and :class:`AsyncUnitOfWork`.

Its drivers (aiosqlite, SQLAlchemy's greenlet support) are core dependencies; an
environment that lost them gets an error saying what to install. PostgreSQL uses
psycopg's async mode (``[postgres]``).
"""

try:
    import aiosqlite  # noqa: F401
    import greenlet  # type: ignore[import-untyped]  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        f"hermes_store.aio needs the 'async' extra ({exc.name} is missing): pip install 'hermes-store[async]'"
    ) from exc

from hermes_store.api.async_session_db import AsyncSessionDB
from hermes_store.db.async_engine import create_async_engine, resolve_async_url
from hermes_store.uow.async_unit_of_work import AsyncUnitOfWork

__all__ = ["AsyncSessionDB", "AsyncUnitOfWork", "create_async_engine", "resolve_async_url"]
