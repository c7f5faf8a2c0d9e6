"""Bulk-loading a benchmark source file into a PostgreSQL store with ``COPY``.

Appending a million messages one call at a time would take hours; ``COPY`` takes
minutes. The schema is created by the store's own Alembic history in two steps, the way
an existing deployment would live through it:

1. ``upgrade(url, "0010")`` — tables, keys and plain indexes (on PostgreSQL 0010 adds
   nothing; the search indexes arrive with 0011 and 0012);
2. ``COPY`` of every session and message of the source file (:mod:`benchmarks.datasets`),
   ids included, and the message id sequence moved past them;
3. ``upgrade(url)`` — revisions 0011 and 0012 build their indexes and the stored
   ``tsvector`` over the loaded rows (timed separately: it is what upgrading a large
   existing store costs).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import sqlalchemy as sa

from benchmarks.datasets import MESSAGE_COLUMNS, SESSION_COLUMNS

__all__ = ["load_postgres"]

_BATCH = 10_000


def _copy_table(source: sqlite3.Connection, cursor: object, table: str, columns: str, select: str) -> int:
    rows = source.execute(select)
    count = 0
    with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:  # type: ignore[attr-defined]
        while True:
            batch = rows.fetchmany(_BATCH)
            if not batch:
                break
            for row in batch:
                copy.write_row(row)
            count += len(batch)
    return count


def load_postgres(url: str, source_path: Path, log: Callable[[str], None] = print) -> dict[str, float]:
    """Create the store at ``url`` and fill it from ``source_path``; return phase timings (s)."""
    import hermes_store

    timings: dict[str, float] = {}
    started = time.perf_counter()
    hermes_store.upgrade(url, "0010")
    timings["schema 0001-0010"] = time.perf_counter() - started

    engine = hermes_store.create_engine(url, poolclass=sa.pool.NullPool)
    started = time.perf_counter()
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        with closing(sqlite3.connect(source_path)) as source:
            sessions = _copy_table(
                source, cursor, "sessions", SESSION_COLUMNS,
                f"SELECT {SESSION_COLUMNS} FROM src_sessions ORDER BY idx",
            )
            log(f"    COPY sessions: {sessions:,} rows")
            messages = _copy_table(
                source, cursor, "messages", MESSAGE_COLUMNS,
                f"SELECT {MESSAGE_COLUMNS} FROM src_messages ORDER BY id",
            )
            log(f"    COPY messages: {messages:,} rows")
        cursor.execute("SELECT setval('messages_id_seq', (SELECT MAX(id) FROM messages))")
        raw.commit()
    finally:
        raw.close()
    timings["COPY rows"] = time.perf_counter() - started

    started = time.perf_counter()
    hermes_store.upgrade(url, "0011")
    timings["upgrade 0011 (GIN indexes)"] = time.perf_counter() - started
    log(f"    0011: {timings['upgrade 0011 (GIN indexes)']:.0f} s")
    started = time.perf_counter()
    hermes_store.upgrade(url)
    timings["upgrade 0012 (stored tsvector, gram index)"] = time.perf_counter() - started
    log(f"    0012: {timings['upgrade 0012 (stored tsvector, gram index)']:.0f} s")
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql("VACUUM (ANALYZE) sessions, messages")
    engine.dispose()
    return timings
