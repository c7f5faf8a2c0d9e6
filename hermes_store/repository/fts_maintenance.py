"""Upkeep of SQLite's FTS5 indexes (``messages_fts`` and ``messages_fts_trigram``).

FTS5 adds a segment to an index for every insert batch, and a ``MATCH`` reads every
segment, so an index left alone grows slower to search and to write. FTS5's ``'optimize'``
command merges an index into one segment without changing what it finds. PostgreSQL's
search indexes need no such merging: there every function here does nothing.
"""

from __future__ import annotations

import logging
import re

from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from hermes_store.db.execution import Bind

log = logging.getLogger("hermes_state")

FTS_TABLES = ("messages_fts", "messages_fts_trigram")
"""The store's FTS5 indexes on SQLite."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _is_sqlite(db: Bind) -> bool:
    return db.get_bind().dialect.name == "sqlite" if hasattr(db, "get_bind") else db.dialect.name == "sqlite"


def fts_table_exists(db: Bind, name: str) -> bool:
    """Whether ``name`` is a table this connection can read (an FTS5 table needs the FTS5
    module as well as the table). Always False on PostgreSQL, which has no FTS5 tables."""
    if not _IDENTIFIER.match(name) or not _is_sqlite(db):
        return False
    try:
        db.execute(text(f'SELECT 1 FROM "{name}" LIMIT 0')).close()
    except sa_exc.OperationalError:
        return False
    return True


def optimize(db: Bind) -> int:
    """Merge each existing FTS5 index into one segment; returns how many were merged.

    An index that cannot be merged now (for instance another process holds the lock) is
    skipped with a warning, so the other one is still merged. 0 on PostgreSQL.
    """
    merged = 0
    for table in FTS_TABLES:
        if not fts_table_exists(db, table):
            continue
        try:
            # FTS5 takes its commands as an insert into a column named after the table.
            db.execute(text(f"INSERT INTO {table}({table}) VALUES('optimize')"))
        except sa_exc.OperationalError as exc:
            log.warning("could not merge the segments of %s: %s", table, exc.orig)
            continue
        merged += 1
    return merged
