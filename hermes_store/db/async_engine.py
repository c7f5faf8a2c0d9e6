"""Asyncio engines: aiosqlite for SQLite, psycopg's async mode (or asyncpg) for PostgreSQL.

The connection policy is the sync store's (:mod:`hermes_store.db.engine`): the file is
created 0600 before SQLite opens it, every connection gets WAL (or the DELETE fallback
with a warning), ``foreign_keys``, a 1 s busy timeout and ``recursive_triggers``, and
write transactions start with ``BEGIN IMMEDIATE``. The busy timeout is spent in
aiosqlite's worker thread, never on the event loop.
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.ext.asyncio import create_async_engine as sa_create_async_engine

from hermes_store.db.engine import (
    BUSY_TIMEOUT_S,
    check_backend,
    install_sqlite_hooks,
    parse_url,
    prepare_sqlite_file,
    resolve_url,
    sqlite_path,
)
from hermes_store.db.urls import async_driver_url


def resolve_async_url(target: str | os.PathLike[str] | URL | None = None) -> URL:
    """Like :func:`hermes_store.db.engine.resolve_url`, but naming an asyncio driver.

    A plain path or a ``sqlite://`` URL becomes ``sqlite+aiosqlite``; a PostgreSQL URL
    without an asyncio driver becomes ``postgresql+psycopg_async``; ``asyncpg``,
    ``psycopg_async`` and ``aiosqlite`` URLs are kept as given.
    """
    if isinstance(target, URL):
        url = target
    elif isinstance(target, str) and "://" in target:
        url = parse_url(target)
    else:
        url = resolve_url(target)
    check_backend(url)
    return async_driver_url(url)


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
    if path is not None and "poolclass" not in engine_kwargs:
        # A connection is a worker thread here; keep them instead of opening overflow
        # ones (thread start, connect, pragmas) and closing them again in bursts.
        engine_kwargs.setdefault("pool_size", 12)
        engine_kwargs.setdefault("max_overflow", 0)
    engine = sa_create_async_engine(url, connect_args=connect_args, **engine_kwargs)
    install_sqlite_hooks(engine.sync_engine, path)
    return engine
