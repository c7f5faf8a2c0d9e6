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
from hermes_store.db.driver_style import bind, styles_for
from hermes_store.db.execution_options import NO_BEGIN_OPTION
from hermes_store.db.public_execution import public_execute
from hermes_store.db.route_choice import RouteMemo
from hermes_store.db.sqlalchemy_private import Route

# A module constant: Python 3.11 cannot specialise reading a class attribute such as
# Route.BARE_CURSOR, which then costs a full attribute lookup each time (per statement).
_BARE_CURSOR = Route.BARE_CURSOR

OPEN_TRANSACTIONS: dict[Connection, DriverTransaction] = {}
"""Each connection with an open :func:`begin_driver_transaction` transaction, and that
transaction (one dict lookup per statement: ``Connection.info`` is a chain of three
properties down to the pool's record, about 1 µs)."""


class DriverTransaction:
    """The driver-run transactions of one connection (:func:`begin_driver_transaction`),
    with what their statements need looked up once: the way they go, the driver
    connection, the statement cache of its dialect and, on the bare-cursor way, one
    cursor they share. A write's statements then cost one dictionary lookup each instead
    of a chain of SQLAlchemy properties and a cursor of their own (about 1.5 µs a
    statement).

    Given back to :func:`begin_driver_transaction`, the object serves the connection's
    next transaction too: its cursor stays open between them, and the way statements go
    is decided again only when a SQLAlchemy listener was added or removed meanwhile
    (:class:`~hermes_store.db.route_choice.RouteMemo`).
    """

    __slots__ = ("connection", "cursor", "driver_connection", "memo", "route", "styles")

    def __init__(self, connection: Connection) -> None:
        if not connection.get_execution_options().get(NO_BEGIN_OPTION):
            raise ValueError(f"a driver transaction needs a connection with the {NO_BEGIN_OPTION} option")
        self.connection = connection
        self.driver_connection: Any = connection.connection.dbapi_connection
        self.styles = styles_for(connection.dialect)
        self.memo = RouteMemo()
        self.route = Route.CORE
        self.cursor: Any = None

    def run(self, connection: Connection, sql: str, params: Mapping[str, Any]) -> DriverResult:
        """Run the hand-written ``sql`` (named ``:param`` placeholders) inside this
        transaction, the way decided as it began; returns its rows."""
        if self.route is not _BARE_CURSOR:
            return public_execute(connection, self.route, sql, params)
        styles = self.styles
        statement, parameters = bind(styles.recent.get(sql) or styles.miss(sql), params)
        return cursor_result(self.execute(connection, statement, parameters))

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
        if self.route is not _BARE_CURSOR:
            # Inside SQLAlchemy's bookkeeping transaction (opened here if need be, sending
            # nothing: NO_BEGIN_OPTION), so that it does not commit around the statement.
            public_execute(connection, self.route, sql, NO_PARAMETERS)
        else:
            self.execute(connection, sql, ())

    def begin(self, connection: Connection, sql: str) -> None:
        """Begin a transaction on this object's connection with ``sql`` (see
        :func:`begin_driver_transaction`), the way its statements go decided first."""
        self.route = self.memo.route_for(connection)
        OPEN_TRANSACTIONS[connection] = self
        self.send_control(connection, sql)

    def end(self, connection: Connection, *, commit: bool = True) -> None:
        """``COMMIT`` (or ``ROLLBACK``) this transaction (see :func:`end_driver_transaction`)."""
        try:
            self.send_control(connection, "COMMIT" if commit else "ROLLBACK")
        except BaseException:
            self.close_cursor()
            raise
        # The cursor stays open for the connection's next transaction (it holds no
        # statement).
        _forget_driver_transaction(connection, commit=commit)

    def close_cursor(self) -> None:
        """Close the shared cursor, if one is open."""
        cursor, self.cursor = self.cursor, None
        if cursor is not None:
            close_quietly(cursor)


def begin_driver_transaction(
    connection: Connection, sql: str, previous: DriverTransaction | None = None
) -> DriverTransaction:
    """Begin a transaction at the driver with ``sql`` (``BEGIN IMMEDIATE``), through the
    seam, so that what watches statements sees it; end it with
    :func:`end_driver_transaction` (given the returned transaction, which saves looking
    it up). ``previous``: what this function returned for the connection's last
    transaction, reused when it was the same connection's.

    Statements of the seam run inside it without beginning anything; SQLAlchemy's own
    execution (``Connection.execute``, an ORM flush) still opens its transaction as
    bookkeeping, so ``connection`` must carry :data:`NO_BEGIN_OPTION` (that transaction
    then sends no ``BEGIN`` of its own), and :func:`end_driver_transaction` closes it.
    The way statements go is decided here, once per transaction (:class:`RouteMemo`).
    """
    transaction = previous
    if transaction is None or transaction.connection is not connection:
        transaction = DriverTransaction(connection)
    transaction.begin(connection, sql)
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
        transaction = OPEN_TRANSACTIONS.get(connection)
        if transaction is None:
            raise ValueError("no driver transaction is open on this connection")
    transaction.end(connection, commit=commit)


def abandon_driver_transaction(connection: Connection) -> None:
    """Forget a :func:`begin_driver_transaction` transaction the driver no longer has (its
    ``BEGIN`` failed, or a failed ``COMMIT`` ended it), rolling back SQLAlchemy's
    bookkeeping transaction if one is open; nothing is sent to the driver."""
    transaction = OPEN_TRANSACTIONS.get(connection)
    if transaction is not None:
        transaction.close_cursor()
    _forget_driver_transaction(connection, commit=False)


def _forget_driver_transaction(connection: Connection, *, commit: bool) -> None:
    # The bookkeeping transaction's end sends nothing: the driver's is over already.
    OPEN_TRANSACTIONS.pop(connection, None)
    bookkeeping = connection.get_transaction()
    if bookkeeping is not None:
        if commit:
            bookkeeping.commit()
        else:
            bookkeeping.rollback()


def in_driver_transaction(connection: Connection) -> bool:
    """Whether :func:`begin_driver_transaction` began a transaction on ``connection`` that
    :func:`end_driver_transaction` has not ended."""
    return connection in OPEN_TRANSACTIONS
