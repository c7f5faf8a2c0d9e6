"""SQLite: everything hermes_store does differently on a SQLite file.

Transactions are begun by the engine's ``begin`` listener (:mod:`hermes_store.db.engine`);
maintenance that must run outside a transaction opens a connection with
:data:`~hermes_store.db.execution_options.NO_BEGIN_OPTION`, so that the listener leaves it in
SQLite's autocommit mode, and still runs through SQLAlchemy (events see it).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import REAL, ColumnElement, orm
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.types import TypeEngine

from hermes_store.db.execution import driver_execute
from hermes_store.db.execution_options import NO_BEGIN_OPTION
from hermes_store.domain.codec import CONTENT_JSON_PREFIX

log = logging.getLogger(__name__)


class SQLiteBackend:
    """The SQLite backend (see :class:`hermes_store.db.backends.Backend`)."""

    name = "sqlite"
    is_file = True
    content_sentinel = CONTENT_JSON_PREFIX
    # A unary + keeps the planner off idx_sessions_source: walking idx_sessions_started
    # newest first and stopping at LIMIT beats computing the preview and last-activity
    # subqueries for every session of a large source.
    listing_source_column = "+s.source"
    # Idle read connections stay checked out: no pool checkout and reset per read.
    keeps_idle_connections = True
    adopts_legacy_files = True
    # One write connection, an fsync per commit: writers share commits.
    groups_commits = True
    # Writes run the driver's transaction (why: driver_transaction.begin_driver_transaction).
    driver_write_begin = "BEGIN IMMEDIATE"


    def insert(self, table: Any) -> Any:
        """SQLite's ``INSERT … ON CONFLICT`` construct."""
        return sqlite.insert(table)

    def ascii_case_like(self, column: Any, pattern: str) -> ColumnElement[bool]:
        """SQLite's ``LIKE`` already ignores ASCII case."""
        return column.like(pattern, escape="\\")  # type: ignore[no-any-return]

    def preview_starts_with_sentinel(self) -> tuple[str, dict[str, Any]]:
        """Compared as bytes: SQLite's text functions stop at the sentinel's NUL byte."""
        return (
            "substr(CAST(m.content AS BLOB), 1, :sentinel_len) = CAST(:sentinel AS BLOB)",
            {"sentinel": CONTENT_JSON_PREFIX, "sentinel_len": len(CONTENT_JSON_PREFIX.encode())},
        )

    def table_count_sql(self, name: str) -> str:
        """Looked up in ``sqlite_master``."""
        return f"(SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '{name}')"

    def in_list(self, expression: str, param: str) -> str:
        """The list travels as one JSON array, unpacked by ``json_each``."""
        return f"{expression} IN (SELECT value FROM json_each(:{param}))"

    def list_value(self, values: Sequence[Any]) -> Any:
        """A JSON array."""
        return json.dumps(list(values))

    def content_bind_processor(self) -> Any:
        """None: SQLite's TEXT column stores any Python value as it is."""
        return None

    def content_result_processor(self) -> Any:
        """None: values come back as they were stored."""
        return None

    def float8_type(self, dialect: Dialect) -> TypeEngine[Any]:
        """``REAL`` (8 bytes in SQLite), as upstream Hermes declares timestamps and costs."""
        return dialect.type_descriptor(REAL())

    def prepare_read_connection(self, connection: Connection) -> Connection:
        """Reads run in SQLite's autocommit mode (each statement its own read transaction,
        as upstream Hermes reads); :meth:`begin_snapshot` opens one when asked."""
        return connection.execution_options(**{NO_BEGIN_OPTION: True})

    def begin_snapshot(self, connection: Connection) -> None:
        """A deferred ``BEGIN``: the first read fixes the snapshot every later one sees."""
        connection.exec_driver_sql("BEGIN")

    def checkpoint(self, connection: Connection) -> None:
        """``PRAGMA wal_checkpoint(PASSIVE)`` in autocommit mode (no transaction begun)."""
        driver_execute(connection, "PRAGMA wal_checkpoint(PASSIVE)", begin=False)

    def take_write_connection(self, connection: Connection) -> int:
        """Turn SQLite's own automatic checkpoint off on the store's write connection
        (returns the setting it had, 1,000 WAL pages by default).

        The unit of work checkpoints every 50 writes (upstream's policy),
        which bounds the WAL by itself; SQLite's automatic checkpoint would add one every
        1,000 pages, which an append reaches every 20-odd commits (its FTS5 and trigram
        index pages make about 45 pages a commit): each is a pass over the WAL and an
        extra ``fsync`` of the database file inside some append. Measured: 1,060 instead
        of 1,111 ``fdatasync`` per 1,000 appends (CHANGELOG.md, 2026-12-04)."""
        previous = driver_execute(connection, "PRAGMA wal_autocheckpoint", begin=False).rows[0][0]
        driver_execute(connection, "PRAGMA wal_autocheckpoint=0", begin=False)
        return int(previous)

    def give_back_write_connection(self, connection: Connection, taken: int) -> None:
        """Restore the automatic checkpoint :meth:`take_write_connection` turned off: the
        pool may be a caller's (``SessionDB(engine=…)``), whose other writes rely on it."""
        driver_execute(connection, f"PRAGMA wal_autocheckpoint={int(taken)}", begin=False)

    def vacuum(self, engine: Engine) -> None:
        """``PRAGMA wal_checkpoint(TRUNCATE)`` (best effort), then ``VACUUM`` (errors propagate)."""
        with engine.connect().execution_options(**{NO_BEGIN_OPTION: True}) as connection:
            try:
                connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").close()
            except Exception as exc:
                log.debug("WAL truncate skipped: %s", exc)
            connection.exec_driver_sql("VACUUM")

    def storage_facts(self, scalar: Callable[[str], Any], *, schema: str | None = None) -> dict[str, Any]:
        """Journal mode, page figures and the SQLite library version (``hermes-store info``)."""
        return {
            "journal_mode": scalar("PRAGMA journal_mode"),
            "page_size": scalar("PRAGMA page_size"),
            "page_count": scalar("PRAGMA page_count"),
            "freelist_count": scalar("PRAGMA freelist_count"),
            "sqlite_version": sqlite3.sqlite_version,
        }

    def after_bulk_copy(self, db: orm.Session) -> None:
        """Nothing: AUTOINCREMENT follows the largest id inserted."""


BACKEND = SQLiteBackend()
