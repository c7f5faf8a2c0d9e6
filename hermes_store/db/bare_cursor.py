"""Hand-written statements run on a bare driver cursor of a SQLAlchemy connection.

The way statements go while nothing watches them: no execution context and no result
object, a few microseconds instead of tens. Driver errors are still wrapped as SQLAlchemy
wraps them (:func:`hermes_store.db.sqlalchemy_private.raise_driver_error`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Connection

from hermes_store.db import sqlalchemy_private
from hermes_store.db.driver_result import DriverResult, cursor_result
from hermes_store.db.driver_style import in_driver_style


def execute_on_bare_cursor(connection: Connection, sql: str, params: Mapping[str, Any]) -> DriverResult:
    """Run ``sql`` (named ``:param`` placeholders) on a driver cursor of ``connection``
    opened for it and closed after; returns its rows."""
    statement, parameters = in_driver_style(connection, sql, params)
    cursor = None
    try:
        cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(statement, parameters)
        return cursor_result(cursor)
    except BaseException as exc:
        sqlalchemy_private.raise_driver_error(connection, exc, statement, parameters, cursor)
    finally:
        if cursor is not None:
            close_quietly(cursor)


def close_quietly(cursor: Any) -> None:
    """Close a driver cursor, ignoring a failure to close."""
    # As SQLAlchemy closes its cursors: a dead connection's cursor may refuse to close,
    # and that must not replace the error being raised. (Runs per statement: a plain
    # try costs nothing when nothing is raised, contextlib.suppress half a microsecond.)
    try:  # noqa: SIM105
        cursor.close()
    except Exception:
        pass
