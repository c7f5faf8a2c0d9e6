"""Hand-written statements run through SQLAlchemy's public execution, for when something
watches statements: :meth:`Connection.execute` (Core: every event fires) or
:meth:`Connection.exec_driver_sql` (echo, logging, cursor events, ``handle_error``,
``do_execute``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Connection

from hermes_store.db.driver_result import DriverResult
from hermes_store.db.driver_style import in_driver_style, text_clause
from hermes_store.db.execution_options import NO_BEGIN_OPTION
from hermes_store.db.sqlalchemy_private import Route


def public_execute(connection: Connection, route: Route, sql: str, params: Mapping[str, Any]) -> DriverResult:
    """Run ``sql`` through SQLAlchemy's public execution the ``route`` way: Core or driver SQL."""
    if route is Route.CORE:
        result = connection.execute(text_clause(sql), dict(params))
    else:
        result = connection.exec_driver_sql(*in_driver_style(connection, sql, params))
    if not result.returns_rows:
        # Only drivers whose dialect reads lastrowid have one (psycopg's cursor has none).
        lastrowid = result.lastrowid if getattr(connection.dialect, "postfetch_lastrowid", False) else None
        return DriverResult(None, [], lastrowid)
    return DriverResult(list(result.keys()), list(result.fetchall()))


def public_execute_outside_a_transaction(
    connection: Connection, route: Route, sql: str, params: Mapping[str, Any]
) -> DriverResult:
    """:func:`public_execute` for a statement that must run outside a transaction:
    SQLAlchemy begins one for every execute, so the begin hook is told to emit no
    ``BEGIN`` and SQLAlchemy's transaction is ended right after (nothing to commit)."""
    previous = connection.get_execution_options().get(NO_BEGIN_OPTION, False)
    connection.execution_options(**{NO_BEGIN_OPTION: True})
    try:
        return public_execute(connection, route, sql, params)
    finally:
        connection.execution_options(**{NO_BEGIN_OPTION: previous})
        connection.commit()
