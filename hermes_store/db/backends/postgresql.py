"""PostgreSQL: everything hermes_store does differently on a PostgreSQL server.

``text`` cannot hold a NUL character, so message content's JSON sentinel
``"\\x00json:"`` is stored as ``"\\ue000json:"`` (a private-use character) and mapped
back on read. A plain string that itself starts with ``"\\ue000json:"`` is stored as
encoded JSON behind the sentinel (as the codec stores a string starting with
``"\\x00json:"``), so it reads back as that string, never as the value it looks like;
rows earlier releases stored read as they did. Numbers are stored as their text, as
SQLite's TEXT affinity does; content PostgreSQL cannot hold at all (``bytes``, other
NULs) is refused before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Double, orm, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.types import TypeEngine

from hermes_store.db.column_types import POSTGRES_CONTENT_SENTINEL, SQLITE_CONTENT_SENTINEL

_UTF8_JSON = json.JSONEncoder(ensure_ascii=False)

MIGRATION_LOCK_KEY = 8675309011
"""The advisory lock every migrator of a PostgreSQL database takes first."""


def content_to_storage(value: Any) -> Any:
    """Message content as PostgreSQL stores it (sentinel mapped, numbers as text)."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        raise TypeError("bytes message content cannot be stored on PostgreSQL; decode it to str first")
    if isinstance(value, bool | int | float):
        return str(value)
    if isinstance(value, str):
        if value.startswith(SQLITE_CONTENT_SENTINEL):
            value = POSTGRES_CONTENT_SENTINEL + value[len(SQLITE_CONTENT_SENTINEL) :]
        elif value.startswith(POSTGRES_CONTENT_SENTINEL):
            # Stored as it is, this text would read back as the encoded JSON it looks like.
            return POSTGRES_CONTENT_SENTINEL + _UTF8_JSON.encode(value)
        if "\x00" in value:
            raise ValueError("PostgreSQL text cannot contain NUL characters; remove them first")
    return value


def content_from_storage(value: Any) -> Any:
    """Undo :func:`content_to_storage` on a value read back."""
    if isinstance(value, str) and value.startswith(POSTGRES_CONTENT_SENTINEL):
        return SQLITE_CONTENT_SENTINEL + value[len(POSTGRES_CONTENT_SENTINEL) :]
    return value


class PostgreSQLBackend:
    """The PostgreSQL backend (see :class:`hermes_store.db.backends.Backend`)."""

    name = "postgresql"
    is_file = False
    content_sentinel = POSTGRES_CONTENT_SENTINEL
    listing_source_column = "s.source"
    # A server connection is checked out per read, so that the pool pre-pings it.
    keeps_idle_connections = False
    adopts_legacy_files = False
    # Server connections commit in parallel, each on its own: writes are not grouped.
    groups_commits = False
    # psycopg begins transactions itself; SQLAlchemy's are the ones to end.
    driver_write_begin = None


    def insert(self, table: Any) -> Any:
        """PostgreSQL's ``INSERT … ON CONFLICT`` construct."""
        return postgresql.insert(table)

    def ascii_case_like(self, column: Any, pattern: str) -> ColumnElement[bool]:
        """``ILIKE``: PostgreSQL's ``LIKE`` is case-sensitive."""
        return column.ilike(pattern, escape="\\")  # type: ignore[no-any-return]

    def preview_starts_with_sentinel(self) -> tuple[str, dict[str, Any]]:
        """``left()`` on the stored (private-use character) sentinel."""
        return (
            "left(m.content, :sentinel_len) = :sentinel",
            {"sentinel": POSTGRES_CONTENT_SENTINEL, "sentinel_len": len(POSTGRES_CONTENT_SENTINEL)},
        )

    def table_count_sql(self, name: str) -> str:
        """``to_regclass`` on the search path, as unqualified names are found."""
        return f"(SELECT count(*) FROM (SELECT to_regclass('{name}') AS found) AS t WHERE found IS NOT NULL)"

    def in_list(self, expression: str, param: str) -> str:
        """``= ANY(array)``: the driver binds a Python list as an array."""
        return f"{expression} = ANY(:{param})"

    def list_value(self, values: Sequence[Any]) -> Any:
        """A list (bound as an array)."""
        return list(values)

    def content_bind_processor(self) -> Any:
        """:func:`content_to_storage`."""
        return content_to_storage

    def content_result_processor(self) -> Any:
        """:func:`content_from_storage`."""
        return content_from_storage

    def float8_type(self, dialect: Dialect) -> TypeEngine[Any]:
        """``double precision``: PostgreSQL's 4-byte ``real`` would round timestamps to minutes."""
        return dialect.type_descriptor(Double())

    def prepare_read_connection(self, connection: Connection) -> Connection:
        """Nothing to set up."""
        return connection

    def begin_snapshot(self, connection: Connection) -> None:
        """Nothing: reads already run in one (READ COMMITTED) transaction."""

    def checkpoint(self, connection: Connection) -> None:
        """Nothing: the server checkpoints on its own."""

    def take_write_connection(self, connection: Connection) -> None:
        """Nothing to set up."""

    def give_back_write_connection(self, connection: Connection, taken: None) -> None:
        """Nothing to undo."""

    def vacuum(self, engine: Engine) -> None:
        """``VACUUM (ANALYZE)`` of the store's tables, in autocommit mode."""
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql("VACUUM (ANALYZE) sessions, messages")

    def storage_facts(self, scalar: Callable[[str], Any], *, schema: str | None = None) -> dict[str, Any]:
        """The database's size on the server (no journal mode); a profile's: that of the tables
        of its schema, with their indexes and TOAST (the database holds other profiles)."""
        if schema is None:
            return {"journal_mode": None, "size_bytes": scalar("SELECT pg_database_size(current_database())")}
        size = scalar(
            "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c "
            f"WHERE c.relnamespace = '\"{schema}\"'::regnamespace AND c.relkind IN ('r', 'm')"
        )
        return {"journal_mode": None, "size_bytes": size}

    def after_bulk_copy(self, db: orm.Session) -> None:
        """Move the message id sequence past the largest id copied."""
        db.connection().execute(
            text(
                "SELECT setval(pg_get_serial_sequence('messages', 'id'), "
                "COALESCE((SELECT MAX(id) FROM messages), 0) + 1, false)"
            )
        )


BACKEND = PostgreSQLBackend()
