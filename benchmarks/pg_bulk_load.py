"""Bulk-loading a benchmark source file into a PostgreSQL store with ``COPY``.

Appending a million messages one call at a time would take hours; ``COPY`` takes
minutes. The usual bulk-load recipe, with the store's own schema:

1. ``upgrade(url)`` — the whole Alembic history on the empty database;
2. the GIN indexes of ``messages`` are dropped, their definitions kept as the server
   reports them (``pg_indexes``), so no DDL is repeated here;
3. ``COPY`` of every session and message of the source file (:mod:`benchmarks.datasets`),
   ids included (the trigger computes ``search_vector`` as rows arrive), and the
   message id sequence moved past them;
4. the GIN indexes are rebuilt from their definitions, two at a time, then ``VACUUM (ANALYZE)``.

``upgrade_from`` (``"0011"``) instead loads the rows into a store at that revision and
times the upgrade to head over them: what an existing deployment's upgrade costs
(``then_upgrade=False`` leaves it at that revision, for a benchmark that upgrades it
itself: ``benchmarks.bench_upgrade``'s online upgrade with probes).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

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


def _gin_indexes(cursor: Any) -> list[tuple[str, str]]:
    cursor.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'messages' "
        "AND indexdef LIKE '%USING gin%' ORDER BY indexname"
    )
    return [(str(name), str(definition)) for name, definition in cursor.fetchall()]


INDEX_BUILDERS = 2
"""GIN indexes built at once, each on its own connection: PostgreSQL builds a GIN index on
one core (no parallel workers for GIN before version 18), and the word-pair and trigram
indexes take most of the time, so two at a time nearly halves the rebuild on two cores."""
BUILD_MEMORY = "1GB"
"""``maintenance_work_mem`` of each build: GIN collects entries in it and merges them into
the index each time it is full, so more memory means fewer, larger merges."""


def _rebuild(engine: sa.Engine, indexes: list[tuple[str, str]], log: Callable[[str], None]) -> None:
    """Build ``indexes`` from their definitions, :data:`INDEX_BUILDERS` at a time."""
    started = time.perf_counter()

    def build(name: str, definition: str) -> None:
        raw = engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.execute(f"SET maintenance_work_mem = '{BUILD_MEMORY}'")
            began = time.perf_counter()
            cursor.execute(definition)
            raw.commit()
            took, done = time.perf_counter() - began, time.perf_counter() - started
            log(f"    rebuilt {name}: {took:.0f} s (done at {done:.0f} s)")
        finally:
            raw.close()

    # The slowest first (their names sort them so: word pairs, then trigrams), so the
    # quicker ones share the other connection.
    ordered = sorted(indexes, key=lambda index: index[0], reverse=True)
    with ThreadPoolExecutor(max_workers=INDEX_BUILDERS) as pool:
        for future in [pool.submit(build, name, definition) for name, definition in ordered]:
            future.result()


def load_postgres(
    url: str,
    source_path: Path,
    log: Callable[[str], None] = print,
    upgrade_from: str | None = None,
    then_upgrade: bool = True,
) -> dict[str, float]:
    """Create the store at ``url`` and fill it from ``source_path``; return phase timings (s)."""
    import hermes_store

    timings: dict[str, float] = {}
    started = time.perf_counter()
    hermes_store.upgrade(url, upgrade_from or "head")
    timings[f"schema to {upgrade_from or 'head'}"] = time.perf_counter() - started

    engine = hermes_store.create_engine(url, poolclass=sa.pool.NullPool, statement_timeout=0)
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        indexes = _gin_indexes(cursor)
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
        started = time.perf_counter()
        with closing(sqlite3.connect(source_path)) as source:
            sessions = _copy_table(
                source,
                cursor,
                "sessions",
                SESSION_COLUMNS,
                f"SELECT {SESSION_COLUMNS} FROM src_sessions ORDER BY idx",
            )
            log(f"    COPY sessions: {sessions:,} rows")
            messages = _copy_table(
                source,
                cursor,
                "messages",
                MESSAGE_COLUMNS,
                f"SELECT {MESSAGE_COLUMNS} FROM src_messages ORDER BY id",
            )
            log(f"    COPY messages: {messages:,} rows")
        cursor.execute("SELECT setval('messages_id_seq', (SELECT MAX(id) FROM messages))")
        raw.commit()
        timings["COPY rows"] = time.perf_counter() - started
        log(f"    COPY: {timings['COPY rows']:.0f} s")
    finally:
        raw.close()
    started = time.perf_counter()
    _rebuild(engine, indexes, log)
    timings["GIN index builds"] = time.perf_counter() - started
    if upgrade_from is not None and then_upgrade:
        started = time.perf_counter()
        hermes_store.upgrade(url)
        timings[f"upgrade {upgrade_from} -> head over the rows"] = time.perf_counter() - started
    started = time.perf_counter()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql("VACUUM (ANALYZE) sessions, messages")
    timings["VACUUM (ANALYZE)"] = time.perf_counter() - started
    engine.dispose()
    return timings
