"""Rows streamed into PostgreSQL's ``COPY … FROM STDIN`` on a SQLAlchemy connection, seen
by what watches statements as if SQLAlchemy had run it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy.engine import Connection

from hermes_store.db import sqlalchemy_private
from hermes_store.db.bare_cursor import close_quietly


def copy_rows(
    connection: Connection, statement: str, rows: Iterable[Sequence[Any]], *, types: Sequence[str] = ()
) -> int:
    """Stream ``rows`` into ``COPY … FROM STDIN`` (``statement``) on ``connection``'s
    psycopg 3 connection, inside the connection's transaction; returns how many rows.

    The rows do not pass through SQLAlchemy at all: they travel as the COPY protocol's
    data messages, written by psycopg's ``Copy`` object, and SQLAlchemy's cursor events
    only fire around the ``execute``/``executemany`` calls SQLAlchemy makes itself. So
    the statement is made visible here the way
    :func:`hermes_store.db.execution.driver_execute` does it: the
    ``before_cursor_execute``/``after_cursor_execute`` listeners receive it once (with no
    parameters), ``echo`` logs it and then the number of rows sent, and driver errors are
    wrapped by the connection (``handle_error``, invalidation on disconnect). ``types``
    (PostgreSQL type names, one per column) are needed for ``FORMAT BINARY`` only.
    """
    if not connection.in_transaction():
        connection.begin()
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        statement = sqlalchemy_private.announce_copy(connection, cursor, statement)
        count = 0
        with cursor.copy(statement) as copy:
            if types:
                copy.set_types(list(types))
            write = copy.write_row
            for row in rows:
                write(row)
                count += 1
        sqlalchemy_private.announce_copy(connection, cursor, statement, rows_sent=count)
        return count
    except BaseException as exc:
        sqlalchemy_private.raise_driver_error(connection, exc, statement, (), cursor)
    finally:
        close_quietly(cursor)
