"""aiosqlite with one thread hop per statement instead of three or four.

aiosqlite runs each SQLite connection in a worker thread; every call into it is a hop
between the event loop and that thread (queue, wake-up, future). SQLAlchemy's adapted
aiosqlite cursor spends a hop creating the driver cursor, one executing, one fetching
and one closing — on SQLite, where a statement itself takes tens of microseconds, the
hops cost more than the work. The cursor below runs create-execute-fetch-close as one
function in the worker thread, so each statement costs one hop. Everything else is
SQLAlchemy's aiosqlite dialect unchanged (connections, errors, commit and rollback).

It leans on two internals, pinned by the ``async`` extra's lower bounds: aiosqlite's
``Connection._execute`` (run a function in the connection's thread) and the slots of
SQLAlchemy's adapted cursor (2.0.44+).
"""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Sequence
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.util import EMPTY_DICT, await_only

_Outcome = tuple[Any, int, int | None, list[Any]]
_NOTHING: _Outcome = (None, -1, None, [])


# A deferred BEGIN takes no lock and no snapshot until the transaction's first statement,
# so it travels with that statement instead of costing a hop of its own. BEGIN IMMEDIATE
# (writes) is never deferred: its lock wait must happen where the unit of work expects it.
_DEFERRABLE_BEGIN = "BEGIN"
_PENDING_BEGIN = "_hermes_store_pending_begin"


def _begin_pending(driver: Any) -> bool:
    return bool(getattr(driver, _PENDING_BEGIN, False))


def _set_begin_pending(driver: Any, pending: bool) -> None:
    setattr(driver, _PENDING_BEGIN, pending)


def _run_statement(
    connection: sqlite3.Connection, operation: str, parameters: Any, many: bool, begin_first: bool
) -> _Outcome:
    """In the worker thread: one statement from cursor creation to its fetched rows."""
    cursor = connection.cursor()
    try:
        if begin_first:
            cursor.execute(_DEFERRABLE_BEGIN)
        if many:
            cursor.executemany(operation, parameters)
        elif parameters is None:
            cursor.execute(operation)
        else:
            cursor.execute(operation, parameters)
        rows = cursor.fetchall() if cursor.description else []
        return cursor.description, cursor.rowcount, cursor.lastrowid, rows
    finally:
        cursor.close()


class OneHopCursor(AsyncAdapt_aiosqlite_cursor):
    """SQLAlchemy's adapted aiosqlite cursor, doing each statement in one worker-thread call."""

    __slots__ = ("_outcome",)

    def __init__(self, adapt_connection: AsyncAdapt_aiosqlite_connection) -> None:
        # No driver cursor up front (that would be a hop); each statement makes its own.
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._cursor = None  # type: ignore[assignment]
        self._soft_closed_memoized = EMPTY_DICT
        self._rows = collections.deque()
        self._outcome = _NOTHING

    @property
    def description(self) -> Any:
        """The DB-API description of the last statement's result."""
        return self._outcome[0]

    @property
    def rowcount(self) -> int:
        """Rows changed by the last statement (-1 for queries)."""
        return self._outcome[1]

    @property
    def lastrowid(self) -> int:
        """The rowid of the last inserted row."""
        return self._outcome[2]  # type: ignore[return-value]

    async def _async_soft_close(self) -> None:
        return None  # nothing open in the driver between statements

    def close(self) -> None:
        """Forget buffered rows (no driver cursor stays open)."""
        self._rows.clear()

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        """Run one statement in the connection's worker thread; rows are buffered here."""
        self._run(operation, parameters, many=False)

    def executemany(self, operation: Any, seq_of_parameters: Sequence[Any]) -> Any:
        """Run one statement for each parameter set, in one worker-thread call."""
        self._run(operation, seq_of_parameters, many=True)

    def _run(self, operation: str, parameters: Any, many: bool) -> None:
        if operation == _DEFERRABLE_BEGIN and not many and not parameters:
            _set_begin_pending(self._connection, True)
            self._outcome = _NOTHING
            self._rows = collections.deque()
            return
        try:
            self._outcome = await_only(self._in_worker(operation, parameters, many))
        except Exception as error:
            self._adapt_connection._handle_exception(error)
        self._rows = collections.deque(self._outcome[3])

    async def _in_worker(self, operation: str, parameters: Any, many: bool) -> _Outcome:
        async with self._adapt_connection._execute_mutex:
            driver: aiosqlite.Connection = self._connection  # type: ignore[assignment]
            begin_first = _begin_pending(driver)
            run = driver._execute  # aiosqlite's "run this in the connection's thread"
            try:
                outcome: _Outcome = await run(  # type: ignore[no-untyped-call]
                    _run_statement, driver._conn, operation, parameters, many, begin_first
                )
            finally:
                if begin_first:
                    # Sent (the BEGIN ran, or failed and SQLAlchemy will roll back).
                    _set_begin_pending(driver, False)
            return outcome


class OneHopConnection(AsyncAdapt_aiosqlite_connection):
    """SQLAlchemy's adapted aiosqlite connection, handing out :class:`OneHopCursor`."""

    __slots__ = ()
    _cursor_cls = OneHopCursor  # type: ignore[assignment]

    def rollback(self) -> None:
        """Roll back, skipping the hop when SQLite has no transaction open.

        SQLAlchemy rolls back once when a connection's transaction ends and again when the
        pool takes the connection back; the second finds nothing to undo. Whether SQLite
        is inside a transaction is a flag sqlite3 reads without touching the database,
        and nothing runs on the connection while its owner is here.
        """
        if self._nothing_to_end():
            return
        super().rollback()

    def commit(self) -> None:
        """Commit, skipping the hop when SQLite has no transaction open (nothing ran)."""
        if self._nothing_to_end():
            return
        super().commit()

    def _nothing_to_end(self) -> bool:
        # A BEGIN still waiting for its first statement ends here without being sent.
        _set_begin_pending(self._connection, False)
        driver = self._connection._connection
        return driver is not None and not driver.in_transaction


class OneHopDBAPI(AsyncAdapt_aiosqlite_dbapi):
    """The DB-API module object for ``create_async_engine(..., module=...)``."""

    def connect(self, *arg: Any, **kw: Any) -> AsyncAdapt_aiosqlite_connection:
        """A connection as SQLAlchemy makes it, with the one-hop cursor."""
        connection = super().connect(*arg, **kw)
        connection.__class__ = OneHopConnection
        return connection


def one_hop_dbapi() -> OneHopDBAPI:
    """A fresh DB-API module object (aiosqlite over sqlite3) with one-hop cursors."""
    return OneHopDBAPI(aiosqlite, sqlite3)
