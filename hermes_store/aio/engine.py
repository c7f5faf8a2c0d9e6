"""Asyncio engines: aiosqlite for SQLite, psycopg's async mode (or asyncpg) for PostgreSQL.

The connection policy is the sync store's (:mod:`hermes_store.engine`): the file is
created 0600 before SQLite opens it, every connection gets WAL (or the DELETE fallback
with a warning), ``foreign_keys``, a 1 s busy timeout and ``recursive_triggers``, and
write transactions start with ``BEGIN IMMEDIATE``. The busy timeout is spent in
aiosqlite's worker thread, never on the event loop.
"""

from __future__ import annotations

import os
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.ext.asyncio import create_async_engine as sa_create_async_engine

from hermes_store.aio.driver import one_hop_dbapi
from hermes_store.engine import (
    BUSY_TIMEOUT_S,
    JournalModeState,
    begin_statement,
    configure_sqlite_connection,
    prepare_sqlite_file,
    resolve_url,
    sqlite_path,
)
from hermes_store.urls import async_driver_url


def resolve_async_url(target: str | os.PathLike[str] | URL | None = None) -> URL:
    """Like :func:`hermes_store.engine.resolve_url`, but naming an asyncio driver.

    A plain path or a ``sqlite://`` URL becomes ``sqlite+aiosqlite``; a PostgreSQL URL
    without an asyncio driver becomes ``postgresql+psycopg_async``; ``asyncpg``,
    ``psycopg_async`` and ``aiosqlite`` URLs are kept as given.
    """
    if isinstance(target, URL):
        return async_driver_url(target)
    if isinstance(target, str) and "://" in target:
        return async_driver_url(make_url(target))
    return async_driver_url(resolve_url(target))


def create_async_engine(
    target: str | os.PathLike[str] | URL | None = None, **engine_kwargs: Any
) -> AsyncEngine:
    """An :class:`AsyncEngine` for ``target`` (path, URL, or the default store).

    Extra keyword arguments go to :func:`sqlalchemy.ext.asyncio.create_async_engine`.
    """
    url = resolve_async_url(target)
    if url.get_backend_name() != "sqlite":
        engine_kwargs.setdefault("pool_pre_ping", True)
        return sa_create_async_engine(url, **engine_kwargs)
    path = sqlite_path(url)
    if path is not None:
        prepare_sqlite_file(path)
    connect_args = {"timeout": BUSY_TIMEOUT_S, **engine_kwargs.pop("connect_args", {})}
    engine_kwargs.setdefault("module", one_hop_dbapi())
    engine = sa_create_async_engine(url, connect_args=connect_args, **engine_kwargs)
    journal = JournalModeState()

    @sa.event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        configure_sqlite_connection(dbapi_connection, journal, path)

    @sa.event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: sa.Connection) -> None:
        # Through SQLAlchemy (the documented aiosqlite recipe): the driver's own execute
        # is a coroutine, and SQLAlchemy wraps its lock errors for the unit of work.
        connection.exec_driver_sql(begin_statement(connection))

    return engine
