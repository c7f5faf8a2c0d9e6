"""Giving up on a database server that has stopped replying.

TCP keepalives and ``tcp_user_timeout`` (:mod:`hermes_store.db.server_options`) find a
peer that has vanished. A connection can also stay healthy at the TCP level while no
reply ever comes: a proxy or load balancer that still acknowledges packets but stopped
forwarding them, a server host that hangs. libpq then waits forever — in the unit of
work, with the process's writer lock held, so every writer of the process waits too.

The server ends every statement within its ``statement_timeout``, so a reply that has
not come :data:`REPLY_GRACE_S` after that never will. A watchdog thread looks at the
connections of every watched engine a few times a second; one that has been busy with
the same statement (or ``COMMIT``, or pre-ping) for longer than that has its socket shut
down, so the waiting call fails at once with a connection error: the unit of work
reconnects within its budget, then raises :class:`~hermes_store.errors.ServerUnavailable`.
Statements are counted at the driver (a psycopg cursor class that reports each one),
and ``SET [LOCAL] statement_timeout`` (and ``RESET``) sent on a connection is followed,
so a migration that lifts the timeout for its transaction or its session is left alone
for as long as the server would let it run.
"""

from __future__ import annotations

import math
import os
import re
import socket
import threading
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from hermes_store.db.server_options import duration_s

REPLY_GRACE_S = 2.0
"""How long after ``statement_timeout`` a reply may still arrive (the server's cancel)."""
_PERIOD_S = 0.25
_BUSY = 1  # libpq's PQTRANS_ACTIVE: a command is in progress on the connection
_SET_TIMEOUT = re.compile(
    r"\s*(?:SET\s+(LOCAL\s+|SESSION\s+)?statement_timeout\s*(?:=|\bTO\b)\s*'?([^'\s;]+)'?"
    r"|RESET\s+statement_timeout)\s*;?\s*$",
    re.IGNORECASE,
)


_MENTIONS_TIMEOUT = re.compile(r"statement_timeout", re.IGNORECASE)
_IDLE, _INTRANS = 0, 2  # libpq's PQTRANS_IDLE and PQTRANS_INTRANS


class _Watched:
    """One DB-API connection of a watched engine, and the ``statement_timeout`` the server
    applies to it, followed the way the server applies it: a session ``SET`` inside a
    transaction holds until that transaction ends and survives only its ``COMMIT``; a
    ``SET LOCAL`` ends with its transaction either way. A change made in a form not read
    here (``set_config``, several statements in one string, a ``DO`` block) lifts the limit
    until the server is asked, before the next statement outside a transaction."""

    __slots__ = (
        "ask",
        "connection",
        "default_s",
        "local_s",
        "pending_s",
        "seen",
        "session_s",
        "since",
        "statements",
        "unknown",
    )

    def __init__(self, connection: Any, limit_s: float) -> None:
        self.connection = connection
        self.default_s = limit_s  # from the engine's statement_timeout
        self.session_s = limit_s  # the session's value, as committed
        self.pending_s: float | None = None  # a session SET in the open transaction
        self.local_s: float | None = None  # after a SET LOCAL, until the transaction ends
        self.unknown = False  # changed in a form not read here: no limit until asked
        self.ask = False  # ask the server before the next statement outside a transaction
        self.statements = 0  # bumped as each statement (or COMMIT/ROLLBACK) starts
        self.seen = -1  # the statement found busy at the last look, -1: none
        self.since = 0.0

    @property
    def limit_s(self) -> float:
        """How long the current statement may go without a reply (``inf``: no limit)."""
        if self.unknown:
            return math.inf
        if self.local_s is not None:
            return self.local_s
        return self.session_s if self.pending_s is None else self.pending_s

    def note(self, statement: str, in_transaction: bool) -> None:
        """Follow a statement that may change ``statement_timeout``, about to be sent."""
        found = _SET_TIMEOUT.match(statement)
        if found is None:
            self.unknown = True
            self.ask = not in_transaction  # in a transaction: asked once it has ended
            return
        scope, value = found.group(1), found.group(2)
        limit = self.default_s if value is None or value.lower() == "default" else _limit_of(value)
        if scope is not None and scope.strip().lower() == "local":
            if in_transaction:  # outside one, the server ignores SET LOCAL (with a warning)
                self.local_s = limit
        elif in_transaction:
            self.pending_s = limit
        else:
            self.session_s = limit

    def transaction_ended(self, committed: bool) -> None:
        if committed and self.pending_s is not None:
            self.session_s = self.pending_s
        self.pending_s = self.local_s = None
        if self.unknown:
            self.ask = True

    def ask_server(self) -> None:
        """Read the session's ``statement_timeout`` from the server (the connection is idle)."""
        self.ask = False
        cursor = self.connection.cursor()
        try:
            cursor.execute("SHOW statement_timeout")
            row = cursor.fetchone()
        finally:
            cursor.close()
        self.session_s = _limit_of(str(row[0])) if row else math.inf
        self.unknown = False


def _limit_of(value: str) -> float:
    """The watchdog's limit for a server setting ``value`` (``inf``: none)."""
    try:
        seconds = duration_s(value)
    except ValueError:
        seconds = 0.0  # a form we do not read: never cut what the server may allow
    return seconds + REPLY_GRACE_S if seconds > 0 else math.inf


class _Watchdog:
    """The process's one watchdog thread and the connections it looks at."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: dict[int, _Watched] = {}
        self._thread: threading.Thread | None = None

    def start_afresh(self) -> None:
        """In a forked child: the parent's thread did not come along (its object did, so
        it would never be started again), its lock may have been held at the fork, and
        the connections it watched are the parent's. Start with none of them."""
        self._lock = threading.Lock()
        self._watched = {}
        self._thread = None

    def add(self, connection: Any, limit_s: float) -> None:
        with self._lock:
            self._watched[id(connection)] = _Watched(connection, limit_s)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="hermes-store-reply-watchdog", daemon=True
                )
                self._thread.start()

    def remove(self, connection: Any) -> None:
        with self._lock:
            self._watched.pop(id(connection), None)

    def get(self, connection: Any) -> _Watched | None:
        return self._watched.get(id(connection))

    def _run(self) -> None:
        while True:
            time.sleep(_PERIOD_S)
            with self._lock:
                watched = list(self._watched.values())
                if not watched:
                    self._thread = None
                    return
            now = time.monotonic()
            for entry in watched:
                try:
                    closed = bool(getattr(entry.connection, "closed", False))
                    overdue = not closed and self._overdue(entry, now)
                except Exception:  # a driver oddity must never stop the watching of the others
                    closed, overdue = False, False
                if closed or overdue:
                    self.remove(entry.connection)  # a connection closed without a pool event too
                if overdue:
                    _shut_down(entry.connection)

    def _overdue(self, entry: _Watched, now: float) -> bool:
        if entry.connection.info.transaction_status != _BUSY:
            entry.seen = -1
            return False
        if entry.seen != entry.statements:
            entry.seen, entry.since = entry.statements, now
            return False
        return now - entry.since >= entry.limit_s


_WATCHDOG = _Watchdog()
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_WATCHDOG.start_afresh)


def _shut_down(connection: Any) -> None:
    """Shut the connection's socket down (both ways) so that its waiting call fails now."""
    try:
        fd = connection.fileno()
        with socket.socket(fileno=os.dup(fd)) as duplicate:
            duplicate.shutdown(socket.SHUT_RDWR)
    except Exception:  # closed meanwhile (OSError, or the driver's own error): nothing waits on it
        return


def watch_replies(engine: Engine, statement_timeout_s: float) -> None:
    """Watch every connection of ``engine`` (psycopg), allowing each reply
    ``statement_timeout_s`` + :data:`REPLY_GRACE_S`; nothing when the timeout is off (0)."""
    if statement_timeout_s <= 0:
        return
    limit_s = statement_timeout_s + REPLY_GRACE_S

    @sa.event.listens_for(engine, "connect")
    def _connected(dbapi_connection: Any, _record: Any) -> None:
        _WATCHDOG.add(dbapi_connection, limit_s)

    @sa.event.listens_for(engine, "close")
    def _closed(dbapi_connection: Any, _record: Any) -> None:
        _WATCHDOG.remove(dbapi_connection)

    @sa.event.listens_for(engine, "close_detached")
    def _closed_detached(dbapi_connection: Any) -> None:
        _WATCHDOG.remove(dbapi_connection)

    @sa.event.listens_for(engine, "do_connect")
    def _counting_cursors(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        # At the driver, not through SQLAlchemy's cursor events: a listener there would
        # take every statement off the lean execution path (hermes_store.db.execution),
        # and the driver also sees what bypasses SQLAlchemy (pre-ping, raw connections).
        cparams["cursor_factory"] = _counting_cursor(cparams.get("cursor_factory"))

    @sa.event.listens_for(engine, "commit")
    def _commit(conn: Connection) -> None:
        _ending_transaction(conn, committed=True)

    @sa.event.listens_for(engine, "rollback")
    def _rollback(conn: Connection) -> None:
        _ending_transaction(conn, committed=False)


def _statement_started(dbapi_connection: Any, statement: Any) -> None:
    """A statement is being sent: a new one to time, maybe one that changes the timeout."""
    entry = _WATCHDOG.get(dbapi_connection)
    if entry is None:
        return
    status = dbapi_connection.info.transaction_status
    if status == _IDLE and (entry.ask or entry.pending_s is not None or entry.local_s is not None):
        # Asked for, or a transaction that changed the timeout ended where no event saw it
        # (the pool's reset, the raw driver): how it ended decides, so ask the server.
        entry.pending_s = entry.local_s = None
        entry.ask_server()  # reports itself through this function, harmlessly
    entry.statements += 1
    text = statement if isinstance(statement, str) else str(statement)
    # SHOW only reads the setting (the watchdog's own question among them).
    if _MENTIONS_TIMEOUT.search(text) is not None and text.lstrip()[:4].upper() != "SHOW":
        # psycopg opens a transaction before the first statement unless in autocommit.
        in_transaction = status == _INTRANS or not dbapi_connection.autocommit
        entry.note(text, in_transaction)


def _counting_cursor(base: type[Any] | None) -> type[Any]:
    """``base`` (psycopg's ``Cursor`` by default) telling the watchdog of each statement."""
    if base is None:
        import psycopg

        base = psycopg.Cursor
    cached = _COUNTING_CURSORS.get(base)
    if cached is not None:
        return cached

    class CountingCursor(base):  # type: ignore[valid-type,misc]
        """A cursor that reports every statement it sends to the reply watchdog."""

        def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
            _statement_started(self.connection, query)
            return super().execute(query, *args, **kwargs)

        def executemany(self, query: Any, *args: Any, **kwargs: Any) -> Any:
            _statement_started(self.connection, query)
            return super().executemany(query, *args, **kwargs)

        def copy(self, statement: Any, *args: Any, **kwargs: Any) -> Any:
            _statement_started(self.connection, statement)
            return super().copy(statement, *args, **kwargs)

    _COUNTING_CURSORS[base] = CountingCursor
    return CountingCursor


_COUNTING_CURSORS: dict[type[Any], type[Any]] = {}


def _ending_transaction(conn: Connection, *, committed: bool) -> None:
    """A ``COMMIT``/``ROLLBACK`` is being sent: a statement of its own, and the end of the
    transaction's timeout changes."""
    if conn.invalidated:
        return  # its DB-API connection is gone (and no longer watched)
    entry = _WATCHDOG.get(conn.connection.dbapi_connection)
    if entry is not None:
        entry.statements += 1
        entry.transaction_ended(committed)
