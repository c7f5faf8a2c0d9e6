"""Upkeep of SQLite's FTS5 indexes (``messages_fts`` and ``messages_fts_trigram``).

FTS5 adds a segment to an index for every insert batch, and a ``MATCH`` reads every
segment, so an index left alone grows slower to search and to write. FTS5's ``'optimize'``
command merges an index into one segment without changing what it finds. PostgreSQL's
search indexes need no such merging: there every function here does nothing.

The DDL of the FTS tables and triggers is :mod:`hermes_store.schema.fts_ddl`'s, which
``hermes-store doctor`` repairs with too.
"""

from __future__ import annotations

import logging
import re

from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind
from hermes_store.schema.fts_ddl import FTS_TABLES as FTS_TABLE_DDL
from hermes_store.schema.fts_ddl import fts_triggers
from hermes_store.schema.indexed_text import indexed_text

log = logging.getLogger(__name__)

FTS_TABLES = ("messages_fts", "messages_fts_trigram")
"""The store's FTS5 indexes on SQLite."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _is_sqlite(db: Bind) -> bool:
    return backend_for(db).name == "sqlite"


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


def missing_fts_objects(db: Bind) -> dict[str, list[str]]:
    """``{index: [missing table or trigger names]}`` for the SQLite FTS indexes whose table
    or any of whose three triggers is gone (``{}`` when all are there, and on PostgreSQL)."""
    if not _is_sqlite(db):
        return {}
    rows = db.execute(text("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'trigger')")).all()
    present = {(str(kind), str(name)) for kind, name in rows}
    missing: dict[str, list[str]] = {}
    for table in FTS_TABLES:
        gone = [] if ("table", table) in present else [table]
        gone += [name for name in fts_triggers(table) if ("trigger", name) not in present]
        if gone:
            missing[table] = gone
    return missing


def restore_fts_objects(db: Bind, missing: dict[str, list[str]]) -> list[str]:
    """Create the ``missing`` FTS tables and triggers (see :func:`missing_fts_objects`) and
    refill each such index from ``messages``; returns the indexes refilled.

    An index whose trigger was gone may have missed writes, so it is refilled whole.
    """
    refilled = []
    for table, names in missing.items():
        for name in names:
            db.execute(text(FTS_TABLE_DDL[table] if name == table else fts_triggers(table)[name]))
        db.execute(text(f"DELETE FROM {table}"))
        db.execute(text(f"INSERT INTO {table}(rowid, content) SELECT id, {indexed_text()} FROM messages"))
        refilled.append(table)
    return refilled
