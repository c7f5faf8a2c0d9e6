"""Asyncio engines: aiosqlite for SQLite, psycopg's async mode (or asyncpg) for PostgreSQL.

Made by the sync store's engine factory (:func:`hermes_store.db.engine.build_engine`),
so the connection policy is the same: on SQLite the file is created 0600 before SQLite
opens it, every connection gets WAL (or the DELETE fallback with a warning),
``foreign_keys``, a 1 s busy timeout and ``recursive_triggers``, and write transactions
start with ``BEGIN IMMEDIATE`` (the busy timeout is spent in aiosqlite's worker thread,
never on the event loop); on PostgreSQL the same server options as ``SessionDB`` (pool,
pre-ping, recycling, statement and lock timeouts, docs/postgresql.md), from the URL's
query or keyword arguments, sent to psycopg or asyncpg in each driver's terms.
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.ext.asyncio import create_async_engine as sa_create_async_engine

from hermes_store.db.engine import (
    BUSY_TIMEOUT_S,
    build_engine,
    check_backend,
    parse_url,
    resolve_url,
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

    Keyword arguments are those of :func:`hermes_store.db.engine.create_engine`: the
    server options (``pool_size``, ``statement_timeout``, …) on PostgreSQL, anything else
    for :func:`sqlalchemy.ext.asyncio.create_async_engine`.
    """
    url = resolve_async_url(target)
    return build_engine(
        url,
        sa_create_async_engine,
        prepare=True,
        journal_mode=None,
        # aiosqlite passes these to sqlite3.connect in its thread.
        sqlite_connect_args={"timeout": BUSY_TIMEOUT_S},
        **engine_kwargs,
    )
