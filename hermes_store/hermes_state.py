"""A drop-in for Hermes Agent's ``hermes_state`` module, backed by hermes_store.

Hermes imports ``SessionDB``, ``DEFAULT_DB_PATH``, ``SCHEMA_VERSION`` and ``SCHEMA_SQL``
from ``hermes_state``, and its tests patch ``hermes_state.SessionDB`` and
``hermes_state.DEFAULT_DB_PATH``. This module offers those names with the same
meaning, so Hermes runs on this store with no code of its own: the wheel also ships a
top-level ``hermes_state`` module that *is* this module, so deleting Hermes' own
``hermes_state.py`` is the only step (see the README, "Running Hermes on this store").

``DEFAULT_DB_PATH`` is, as upstream, the default path computed at import. Unlike
upstream, ``SessionDB()`` still follows a ``HERMES_HOME`` changed later (profile
switches, test fixtures) — unless someone rebinds ``DEFAULT_DB_PATH`` here (as Hermes'
tests do), which then wins, as it did upstream.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, Engine
from sqlalchemy.schema import CreateTable

from hermes_store.api import session_db as facade
from hermes_store.domain.paths import default_db_path
from hermes_store.schema.legacy import HEAD_VERSION
from hermes_store.schema.models import Base

__all__ = ["DEFAULT_DB_PATH", "SCHEMA_SQL", "SCHEMA_VERSION", "SessionDB"]

DEFAULT_DB_PATH: Path = default_db_path()
"""``$HERMES_HOME/state.db`` (``~/.hermes/state.db``) as it was when this module was imported."""

_IMPORTED_DEFAULT = DEFAULT_DB_PATH

SCHEMA_VERSION: int = HEAD_VERSION
"""Upstream's schema version this store keeps (``schema_version`` holds it)."""

SCHEMA_SQL: str = "\n".join(
    f"{str(CreateTable(table).compile(dialect=sqlite_dialect.dialect())).strip()};"
    for table in Base.metadata.sorted_tables
)
"""The tables' DDL (SQLite), rendered from ``hermes_store.schema.models``: every column a store has."""


class SessionDB(facade.SessionDB):
    """``hermes_store.SessionDB``, plus the upstream-only helpers Hermes' tests use."""

    def __init__(
        self,
        db_path: str | os.PathLike[str] | None = None,
        *,
        url: str | URL | None = None,
        engine: Engine | None = None,
    ) -> None:
        """Open (creating or upgrading) the store at ``db_path``, ``url`` or ``engine``.

        With none of them, the store is ``DEFAULT_DB_PATH`` — or, while nobody has
        rebound that name, ``$HERMES_HOME/state.db`` as it is now.

        Lock contention is handled as upstream v11 handles it: SQLite's busy handler waits
        at most 1 s, then the write is retried after 20-150 ms of random jitter, up to 15
        attempts (``WriteConflict`` after that). Waiting up to 30 s inside SQLite's own
        handler instead would let its fixed sleep schedule line the writers of a busy
        gateway up one behind another (docs/reliability.md).
        """
        if db_path is None and url is None and engine is None:
            db_path = _default_path()
        super().__init__(db_path, url=url, engine=engine)

    @staticmethod
    def _parse_schema_columns(schema_sql: str) -> dict[str, dict[str, str]]:
        """``{table: {column: declared type}}`` for the tables ``schema_sql`` creates.

        SQLite itself reads the DDL (into a throwaway in-memory database), so any syntax
        it accepts is understood.
        """
        scratch = sqlite3.connect(":memory:")
        try:
            scratch.executescript(schema_sql)
            names = scratch.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
            return {
                name: {str(row[1]): str(row[2]) for row in scratch.execute(f'PRAGMA table_info("{name}")')}
                for (name,) in names
            }
        finally:
            scratch.close()


def _default_path() -> Path:
    rebound: Any = globals()["DEFAULT_DB_PATH"]
    if rebound is not _IMPORTED_DEFAULT:
        return Path(rebound)
    return default_db_path()
