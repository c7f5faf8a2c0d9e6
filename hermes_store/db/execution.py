"""The one place hermes_store executes SQL: its public entry points.

Every statement runs on a SQLAlchemy :class:`~sqlalchemy.engine.Connection` — through its
public execution whenever anything watches, on that connection's own driver cursor only
while nothing does — so that whatever listens to the engine sees all of it: ``echo=True``,
``before_execute``/``after_execute`` and ``before_cursor_execute``/``after_cursor_execute``
listeners (query counters, OpenTelemetry), ``do_execute`` and ``handle_error``. Errors
therefore arrive in one family, SQLAlchemy's ``DBAPIError`` subclasses, whichever method
meets them; the unit of work translates the ones that mean something
(:mod:`hermes_store.db.sqlite_errors`) once.

Two ways in, chosen per statement:

* ORM/Core-built statements (:func:`run`) and hand-written SQL with an ``IN :name`` list
  (:mod:`hermes_store.db.expanding_text`) go through :meth:`Connection.execute`;
* every other hand-written statement (the hot path: append, ``get_session``, search,
  listing, replay, lineage, ``BEGIN``) goes to :func:`driver_execute`, with its SQL put
  into the driver's parameter style once by SQLAlchemy's compiler
  (:mod:`hermes_store.db.driver_style`). While anything watches statements it runs
  through SQLAlchemy's public execution (:mod:`hermes_store.db.public_execution`), so
  every listener gets what SQLAlchemy gives it. While nothing does, on a bare driver
  cursor of the same connection (:mod:`hermes_store.db.bare_cursor`), without the result
  object (a few microseconds instead of tens). Telling the two apart
  (:mod:`hermes_store.db.route_choice`) and wrapping the bare cursor's errors as
  SQLAlchemy does take SQLAlchemy private members, all in
  :mod:`hermes_store.db.sqlalchemy_private` behind a version and feature guard: where they
  are missing, every statement takes the public path.

Columns named in ``content_keys`` hold message content and are mapped back from the
backend's storage form (:mod:`hermes_store.db.content_decoding`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Executable, orm
from sqlalchemy.engine import Connection, CursorResult

from hermes_store.db import sqlalchemy_private
from hermes_store.db.bare_cursor import execute_on_bare_cursor
from hermes_store.db.content_decoding import decode_content
from hermes_store.db.driver_result import NO_PARAMETERS, DriverResult
from hermes_store.db.driver_transaction import OPEN_TRANSACTIONS
from hermes_store.db.expanding_text import execute_expanding_text, expanding_names
from hermes_store.db.public_execution import public_execute, public_execute_outside_a_transaction
from hermes_store.db.route_choice import ROUTE_KEY
from hermes_store.db.sqlalchemy_private import Route

Bind = orm.Session | Connection

# OPEN_TRANSACTIONS.get, bound once: looked up per statement.
_open_transaction = OPEN_TRANSACTIONS.get


def connection_of(db: Bind) -> Connection:
    """The Core connection (inside the session's transaction) that ``db`` runs on."""
    return db.connection() if isinstance(db, orm.Session) else db


def run(
    db: Bind, statement: Executable, params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None
) -> CursorResult[*tuple[Any, ...]]:
    """Execute a Core/ORM-built statement on ``db``'s connection; returns the cursor result.

    A sequence of mappings as ``params`` runs the statement once per mapping
    (``executemany``).
    """
    return connection_of(db).execute(statement, params)


def driver_execute(
    connection: Connection,
    sql: str,
    params: Mapping[str, Any] = NO_PARAMETERS,
    *,
    begin: bool = True,
    route: Route | None = None,
) -> DriverResult:
    """Run the hand-written ``sql`` (named ``:param`` placeholders, values in the driver's
    form, no list values) on ``connection``; rows come back as the driver gives them.

    The way depends on who watches (:func:`sqlalchemy_private.route`): a
    ``before_execute``/``after_execute`` listener gets :meth:`Connection.execute`
    (Core, SQLAlchemy's compiled cache: every event fires); echo, logging, a cursor
    event, ``do_execute`` or ``handle_error`` get :meth:`Connection.exec_driver_sql`;
    when nothing watches, the statement runs in the driver's parameter style on a bare
    driver cursor of the same connection, with SQLAlchemy's error wrapping
    (``DBAPIError`` family, invalidation on disconnect) and no result object. Inside a
    transaction begun on an engine with hermes_store's ``begin`` hook (SQLite), or by
    :func:`hermes_store.db.driver_transaction.begin_driver_transaction`, the way is the
    one decided as the transaction began; otherwise it is decided for this statement (or
    given as ``route``).

    ``begin=False`` is for statements outside a transaction: the ``BEGIN`` itself, a WAL
    checkpoint on the idle write connection.
    """
    if begin:
        transaction = _open_transaction(connection)
        if transaction is not None:
            return transaction.run(connection, sql, params)
        if not connection.in_transaction():
            connection.begin()
        route = route or connection.info.get(ROUTE_KEY) or sqlalchemy_private.route(connection)
    elif route is None:
        route = sqlalchemy_private.route(connection)
    if route is Route.BARE_CURSOR:
        return execute_on_bare_cursor(connection, sql, params)
    if begin or connection.in_transaction():
        return public_execute(connection, route, sql, params)
    return public_execute_outside_a_transaction(connection, route, sql, params)


def _fetch(
    db: Bind, sql: str, params: Mapping[str, Any] | None, content: tuple[str, ...]
) -> tuple[list[str], list[Any]]:
    values = params or {}
    if expanding_names(sql, values):
        # An IN list: SQLAlchemy's expanding parameters, through Core.
        expanded = execute_expanding_text(connection_of(db), sql, values, content)
        return list(expanded.keys()), list(expanded.fetchall())
    connection = connection_of(db)
    result = driver_execute(connection, sql, values)
    names, rows = result.names or [], result.rows
    if content:
        rows = decode_content(connection.dialect, names, rows, content)
    return names, rows


def fetch_dicts(
    db: Bind,
    sql: str,
    params: Mapping[str, Any] | None = None,
    content_keys: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """Rows of ``sql`` as dicts. List values in ``params`` expand for ``IN :name``.

    ``content_keys`` name columns holding message content, mapped back from the
    backend's storage form by :class:`hermes_store.db.column_types.MessageContent`'s result
    processor. Statements without a list run through :func:`driver_execute`.
    """
    names, rows = _fetch(db, sql, params, tuple(content_keys))
    return [dict(zip(names, row, strict=True)) for row in rows]


def fetch_tuples(
    db: Bind, sql: str, params: Mapping[str, Any] | None = None, content_keys: Iterable[str] = ()
) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` as tuples, same binding and content rules as :func:`fetch_dicts`."""
    return [tuple(row) for row in _fetch(db, sql, params, tuple(content_keys))[1]]


def scalar_text(db: Bind, statement: Executable) -> str | None:
    """The first column of the first row of ``statement`` (a text column), or ``None``."""
    value = run(db, statement).scalar()
    return None if value is None else str(value)
