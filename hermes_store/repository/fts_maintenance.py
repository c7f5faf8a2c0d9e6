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

from sqlalchemy import bindparam, text
from sqlalchemy import exc as sa_exc

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind
from hermes_store.schema.file_layout import (
    CJK_INDEX,
    CJK_STALE_KEY,
    CJK_TRIGGERS,
    INLINE_FTS_LAYOUT,
    REPAIRABLE_EXTERNAL_LAYOUT,
    FileLayout,
    layout_of,
)
from hermes_store.schema.fts_ddl import FTS_TABLES as FTS_TABLE_DDL
from hermes_store.schema.fts_ddl import external_fts_triggers, fts_triggers
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


def unrepairable(db: Bind, missing: dict[str, list[str]]) -> str | None:
    """Why the ``missing`` objects of ``db``'s file are left to upstream Hermes (one line
    naming what repairs them), or ``None`` when this store repairs them."""
    return _unrepairable(layout_of(db), missing)


def _unrepairable(layout: FileLayout, missing: dict[str, list[str]]) -> str | None:
    if not missing or layout.fts_layout in (None, INLINE_FTS_LAYOUT):
        return None
    names = ", ".join(name for names in missing.values() for name in names)
    if layout.fts_stale:
        reason = "Hermes marked its full-text index stale"
    elif layout.fts_layout != REPAIRABLE_EXTERNAL_LAYOUT or any(
        table in gone for table, gone in missing.items()
    ):
        reason = f"this hermes_store does not write Hermes' full-text layout {layout.fts_layout}"
    else:
        return None
    return (
        f"the full-text index lacks {names} and {reason}: open the file once with the Hermes that "
        "wrote it (it recreates and rebuilds the index), then search finds every message again"
    )


def restore_fts_objects(db: Bind, missing: dict[str, list[str]]) -> list[str]:
    """Create the ``missing`` FTS tables and triggers (see :func:`missing_fts_objects`) in
    the file's own layout and refill each such index; returns the indexes refilled.

    An index whose trigger was gone may have missed writes, so it is refilled whole: the
    inline layout from ``messages``; upstream's external-content layout 1 (triggers only:
    see :func:`unrepairable` for what is left to upstream) with FTS5's ``'rebuild'``,
    which reads the file's own content table or view. Nothing of another layout is ever
    written into an index.
    """
    layout = layout_of(db)
    if _unrepairable(layout, missing) is not None:
        return []
    external = layout.external_fts
    refilled = []
    for table, names in missing.items():
        triggers = external_fts_triggers(table) if external else fts_triggers(table)
        for name in names:
            db.execute(text(FTS_TABLE_DDL[table] if name == table else triggers[name]))
        if external:
            db.execute(text(f"INSERT INTO {table}({table}) VALUES('rebuild')"))
        else:
            db.execute(text(f"DELETE FROM {table}"))
            db.execute(text(f"INSERT INTO {table}(rowid, content) SELECT id, {indexed_text()} FROM messages"))
        refilled.append(table)
    return refilled


def cjk_index_unloadable(db: Bind) -> bool:
    """Whether the file has upstream's optional CJK index with triggers that this process
    cannot run (its tokenizer is a loadable extension this process does not have): every
    message write would fail on them. One look at ``sqlite_master`` on a file without
    them: it runs on every open."""
    present = {
        str(row[0])
        for row in db.execute(
            text("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name IN :names").bindparams(
                bindparam("names", expanding=True)
            ),
            {"names": list(CJK_TRIGGERS)},
        )
    }
    # Readable only where the tokenizer loads (fts_table_exists reads it).
    return bool(present) and not fts_table_exists(db, CJK_INDEX)


def detach_cjk_index(db: Bind) -> None:
    """Do what upstream Hermes does beside a CJK index it cannot load: drop the index's
    triggers, so that message writes go on, and mark the index stale in ``state_meta``,
    so that a Hermes with the tokenizer rebuilds it before searching it again."""
    for name in CJK_TRIGGERS:
        db.execute(text(f"DROP TRIGGER IF EXISTS {name}"))
    db.execute(
        text(
            "INSERT INTO state_meta (key, value) VALUES (:key, '1') "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value"
        ),
        {"key": CJK_STALE_KEY},
    )
