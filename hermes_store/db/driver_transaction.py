"""Write transactions begun and ended at the driver, through the execution seam.

For the SQLite write connection, whose every write is one short transaction: run by the
driver instead of by SQLAlchemy's :class:`~sqlalchemy.engine.RootTransaction`, it costs
two statements, where SQLAlchemy's ``begin``/``commit`` (its event dispatch and the
``begin`` hook around the same two statements) cost about 40 µs an append in place
(CHANGELOG.md, 2026-12-02).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Connection

from hermes_store.db import sqlalchemy_private
from hermes_store.db.bare_cursor import close_quietly
from hermes_store.db.driver_result import NO_PARAMETERS, DriverResult, cursor_result
from hermes_store.db.driver_style import in_driver_style
from hermes_store.db.execution_options import NO_BEGIN_OPTION
from hermes_store.db.public_execution import public_execute
from hermes_store.db.route_choice import decide_route
from hermes_store.db.sqlalchemy_private import Route

DRIVER_TRANSACTION_KEY = "hermes_store_driver_transaction"
"""``Connection.info`` key of the open :func:`begin_driver_transaction` transaction
(a :class:`DriverTransaction`), ``None`` when there is none."""


class DriverTransaction:
    """An open transaction begun by :func:`begin_driver_transaction`, with what its
    statements need looked up once: the way they go, the driver connection and, on the
    bare-cursor way, one cursor they share. A write's statements then cost one
    dictionary lookup each instead of a chain of SQLAlchemy properties and a cursor of
    their own (about 1.5 µs a statement)."""

    __slots__ = ("cursor", "driver_connection", "route")

    def __init__(self, route: Route, driver_connection: Any) -> None:
        self.route = route
        self.driver_connection = driver_connection
        self.cursor: Any = None

    def run(self, connection: Connection, sql: str, params: Mapping[str, Any]) -> DriverResult:
        """Run the hand-written ``sql`` (named ``:param`` placeholders) inside this
        transaction, the way decided as it began; returns its rows."""
        if self.route is Route.BARE_CURSOR:
            statement, parameters = in_driver_style(connection, sql, params)
            return cursor_result(self.execute(connection, statement, parameters))
        return public_execute(connection, self.route, sql, params)

    def execute(self, connection: Connection, statement: str, parameters: Any) -> Any:
        """Run ``statement`` (in the driver's parameter style) on the shared cursor;
        returns that cursor. A failed statement's cursor is dropped (SQLAlchemy's error
        handling closes it) and the next statement opens another."""
        cursor = self.cursor
        if cursor is None:
            cursor = self.cursor = self.driver_connection.cursor()
        try:
            cursor.execute(statement, parameters)
        except BaseException as exc:
            self.cursor = None
            sqlalchemy_private.raise_driver_error(connection, exc, statement, parameters, cursor)
        return cursor

    def send_control(self, connection: Connection, sql: str) -> None:
        """Send the transaction's ``BEGIN …``, ``COMMIT`` or ``ROLLBACK`` the way its
        statements go."""
        if self.route is not Route.BARE_CURSOR:
            # Inside SQLAlchemy's bookkeeping transaction (opened here if need be, sending
            # nothing: NO_BEGIN_OPTION), so that it does not commit around the statement.
            public_execute(connection, self.route, sql, NO_PARAMETERS)
        else:
            self.execute(connection, sql, ())

    def close_cursor(self) -> None:
        """Close the shared cursor, if one is open (as the transaction ends)."""
        cursor, self.cursor = self.cursor, None
        if cursor is not None:
            close_quietly(cursor)


def begin_driver_transaction(connection: Connection, sql: str) -> DriverTransaction:
    """Begin a transaction at the driver with ``sql`` (``BEGIN IMMEDIATE``), through the
    seam, so that what watches statements sees it; end it with
    :func:`end_driver_transaction` (given the returned transaction, which saves looking
    it up).

    Statements of the seam run inside it without beginning anything; SQLAlchemy's own
    execution (``Connection.execute``, an ORM flush) still opens its transaction as
    bookkeeping, so ``connection`` must carry :data:`NO_BEGIN_OPTION` (that transaction
    then sends no ``BEGIN`` of its own), and :func:`end_driver_transaction` closes it.
    The way statements go is decided here, once (:func:`decide_route`).
    """
    if not connection.get_execution_options().get(NO_BEGIN_OPTION):
        raise ValueError(f"a driver transaction needs a connection with the {NO_BEGIN_OPTION} option")
    transaction = DriverTransaction(decide_route(connection), connection.connection.dbapi_connection)
    connection.info[DRIVER_TRANSACTION_KEY] = transaction
    transaction.send_control(connection, sql)
    return transaction


def end_driver_transaction(
    connection: Connection, *, commit: bool, transaction: DriverTransaction | None = None
) -> None:
    """``COMMIT`` (or ``ROLLBACK``) the transaction :func:`begin_driver_transaction` began,
    through the seam, then close SQLAlchemy's bookkeeping transaction if a statement
    opened one (nothing reaches the driver: its transaction is already over). If the
    ``COMMIT`` fails, the driver's transaction may still be open: the caller rolls it back
    (``commit=False``) or discards the connection."""
    if transaction is None:
        transaction = connection.info.get(DRIVER_TRANSACTION_KEY)
        if transaction is None:
            raise ValueError("no driver transaction is open on this connection")
    transaction.send_control(connection, "COMMIT" if commit else "ROLLBACK")
    transaction.close_cursor()
    _forget_driver_transaction(connection, commit=commit)


def abandon_driver_transaction(connection: Connection) -> None:
    """Forget a :func:`begin_driver_transaction` transaction the driver no longer has (its
    ``BEGIN`` failed, or a failed ``COMMIT`` ended it), rolling back SQLAlchemy's
    bookkeeping transaction if one is open; nothing is sent to the driver."""
    transaction: DriverTransaction | None = connection.info.get(DRIVER_TRANSACTION_KEY)
    if transaction is not None:
        transaction.close_cursor()
    _forget_driver_transaction(connection, commit=False)


def _forget_driver_transaction(connection: Connection, *, commit: bool) -> None:
    # The bookkeeping transaction's end sends nothing: the driver's is over already.
    connection.info[DRIVER_TRANSACTION_KEY] = None
    bookkeeping = connection.get_transaction()
    if bookkeeping is not None:
        if commit:
            bookkeeping.commit()
        else:
            bookkeeping.rollback()


def in_driver_transaction(connection: Connection) -> bool:
    """Whether :func:`begin_driver_transaction` began a transaction on ``connection`` that
    :func:`end_driver_transaction` has not ended."""
    return connection.info.get(DRIVER_TRANSACTION_KEY) is not None
