"""One write = one function run inside one write transaction, retried whole.

Several processes share one SQLite file. A writer that finds the database locked must
not half-apply its work or give up at once: the whole transaction function is run again
after a random 20–150 ms pause (random, so that writers stop colliding in lock-step),
up to 15 attempts. Lock errors are recognised by SQLite's error code, never by message
text. Writers of one process are serialised by a lock here so they queue in Python
instead of fighting each other through SQLite's busy handler.

Repositories receive the ORM session and never commit: the unit of work commits when
the function returns, and rolls back if it raises.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import exc as sa_exc
from sqlalchemy import orm
from sqlalchemy.engine import Connection, Engine, RootTransaction

from hermes_store.db.backends import backend_for
from hermes_store.db.engine import write_engine
from hermes_store.db.server_errors import is_server_unreachable
from hermes_store.db.sqlite_errors import is_retryable_conflict, raise_translated
from hermes_store.errors import NestedWrite, ServerUnavailable, WriteConflict
from hermes_store.uow.fork_safety import forget_in_child

log = logging.getLogger(__name__)

T = TypeVar("T")

# Everything hermes_store runs arrives wrapped (DBAPIError); sqlite3's own errors can
# only come from caller code given the raw connection (SessionDB._execute_write).
_DRIVER_ERRORS = (sa_exc.DBAPIError, sqlite3.Error)

MAX_ATTEMPTS = 15
RETRY_MIN_S = 0.020
RETRY_MAX_S = 0.150
CHECKPOINT_EVERY_N_WRITES = 50
RECONNECT_WAIT_S = 15.0
"""How long a write keeps reconnecting while the database server is unreachable."""
_IDLE_READERS_KEPT = 8


class UnitOfWork:
    """Runs retried write transactions and short read transactions on one engine.

    Thread-safe: one instance may be shared by all threads of a process.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        max_attempts: int = MAX_ATTEMPTS,
        retry_min_s: float = RETRY_MIN_S,
        retry_max_s: float = RETRY_MAX_S,
        checkpoint_every: int = CHECKPOINT_EVERY_N_WRITES,
        owns_engine: bool = True,
        reconnect_wait_s: float = RECONNECT_WAIT_S,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.engine = engine
        self.owns_engine = owns_engine
        self.max_attempts = max_attempts
        self.retry_min_s = retry_min_s
        self.retry_max_s = retry_max_s
        self.checkpoint_every = checkpoint_every
        self.reconnect_wait_s = reconnect_wait_s
        self._write_engine = write_engine(engine)
        self._backend = backend_for(engine)
        self._reader = orm.sessionmaker(bind=engine, expire_on_commit=False)
        self._idle_readers: list[orm.Session] = []
        self._idle_connections: list[Connection] = []
        self._closing = False
        # Writes are serialised in-process anyway, so one connection serves them all, kept
        # open like upstream's: no pool checkout and reset per write on the hot path.
        self._write_connection: Connection | None = None
        self._write_session = orm.Session()
        self._lock = threading.Lock()
        # The thread inside write(), so that a nested write fails instead of deadlocking.
        self._writer: int | None = None
        self.write_count = 0
        self.retry_count = 0
        forget_in_child(self, _forget_connections)

    def write(self, work: Callable[[orm.Session], T], operation: str) -> T:
        """Run ``work(session)`` in one write transaction and commit; retry it whole on lock.

        ``work`` gets an ORM session (flushed before the commit); :meth:`write_connection`
        is the same with a Core connection, which costs less per write.

        ``operation`` names what is being written, for the error raised when every attempt
        found the database locked (:class:`WriteConflict`). Other errors propagate at
        once, after rollback; SQLite storage errors become the matching ``StoreError``.
        On a database server, a write whose connection broke before its ``COMMIT`` was
        sent is retried on a fresh connection for up to ``reconnect_wait_s`` (a restart
        or a dropped connection), then :class:`ServerUnavailable` is raised; one that
        broke during ``COMMIT`` is never retried (it may have been applied).
        A write started from inside ``work`` (same thread) raises :class:`NestedWrite`.
        ``work`` may run more than once, so it must not have side effects outside the session.
        """
        return self._write(work, operation, with_session=True)

    def write_connection(self, work: Callable[[Connection], T], operation: str) -> T:
        """Run ``work(connection)`` in one write transaction and commit; retry it whole on lock.

        The same contract as :meth:`write`, but ``work`` gets the transaction's Core
        :class:`~sqlalchemy.engine.Connection` instead of an ORM session: no session to
        join and flush, which is most of the fixed cost of a short write (the facade's
        writes all run this way).
        """
        return self._write(work, operation, with_session=False)

    def _write(self, work: Callable[[Any], T], operation: str, *, with_session: bool) -> T:
        if self._writer == self._caller():
            raise NestedWrite(operation)
        conflicts = 0
        reconnect_deadline: float | None = None
        while True:
            with self._lock:
                self._writer = self._caller()
                try:
                    result = self._attempt(work, with_session)
                except _DRIVER_ERRORS as exc:
                    if is_server_unreachable(exc):
                        now = time.monotonic()
                        reconnect_deadline = reconnect_deadline or now + self.reconnect_wait_s
                        if now >= reconnect_deadline:
                            raise_translated(exc, operation)
                    elif not is_retryable_conflict(exc):
                        raise_translated(exc, operation)
                    else:
                        conflicts += 1
                        if conflicts >= self.max_attempts:
                            raise WriteConflict(operation, self.max_attempts, exc) from None
                else:
                    self._count_success()
                    return result
                finally:
                    self._writer = None
            self.retry_count += 1
            self._pause(random.uniform(self.retry_min_s, self.retry_max_s))

    def _caller(self) -> int:
        """Who is writing: the thread (the asyncio unit of work says: the store call)."""
        return threading.get_ident()

    def _pause(self, seconds: float) -> None:
        """Wait between attempts (the asyncio unit of work waits without blocking its loop)."""
        time.sleep(seconds)

    def _attempt(self, work: Callable[[Any], T], with_session: bool) -> T:
        """One try: BEGIN (IMMEDIATE on SQLite), run ``work``, COMMIT; roll back on error."""
        connection = self._write_connection
        if connection is None or connection.closed or connection.invalidated:
            self._write_connection = None
            connection = self._write_connection = self._write_engine.connect()
            self._write_session = orm.Session(bind=connection, expire_on_commit=False)
        session = self._write_session
        try:
            # Committed inside the block so a COMMIT that fails is told apart (_commit);
            # the context manager still rolls back whatever state a failure leaves.
            with connection.begin() as transaction:
                if with_session:
                    result = work(session)
                    session.flush()
                else:
                    result = work(connection)
                _commit(transaction)
            return result
        except BaseException:
            self._end_failed_transaction(connection)
            raise
        finally:
            if with_session:
                # Reused across writes (cheaper than a new one each time); close() empties it.
                session.close()

    def _end_failed_transaction(self, connection: Connection) -> None:
        """Leave no transaction open after a failed attempt, whatever SQLAlchemy believes.

        A COMMIT refused with SQLITE_BUSY (a reader holding SHARED in rollback-journal
        mode) keeps SQLite's transaction open while SQLAlchemy marks it finished, so its
        rollback() sends nothing; the next BEGIN would then fail for good and this process
        would keep the lock from every other. The driver's own flag tells the truth: such a
        connection is discarded (closing it makes SQLite roll back and release the lock).
        """
        try:
            # A transaction whose COMMIT failed is inactive but still open: end it too.
            leftover = connection.get_transaction()
            if leftover is not None:
                leftover.rollback()
            if not connection.invalidated and _driver_in_transaction(connection):
                connection.invalidate()
        except _DRIVER_ERRORS:
            connection.invalidate()
        if connection.invalidated:
            connection.close()
            self._write_connection = None

    @contextmanager
    def read(self) -> Iterator[orm.Session]:
        """A session for reads: a deferred transaction that never takes the write lock."""
        try:
            session = self._idle_readers.pop()
        except IndexError:
            session = self._reader()
        try:
            yield session
        except _DRIVER_ERRORS as exc:
            raise_translated(exc, "reading")
        finally:
            # close() ends the transaction and returns the connection to the pool; the
            # emptied session object is kept for the next read (cheaper than a new one).
            session.close()
            if len(self._idle_readers) < _IDLE_READERS_KEPT:
                self._idle_readers.append(session)

    @contextmanager
    def read_connection(self, snapshot: bool = False) -> Iterator[Connection]:
        """A Core connection for reads, whatever it began rolled back afterwards.

        The cheap read path: no ORM session, and on backends that keep idle connections
        (SQLite files, :attr:`~hermes_store.db.backends.Backend.keeps_idle_connections`) no
        pool checkout either — a connection is taken from a small stack of idle ones.
        Without ``snapshot`` each statement may see the latest commit (SQLite reads in
        autocommit mode, as upstream Hermes does); with it, every statement sees the
        same snapshot (a read transaction).
        """
        try:
            connection = self._idle_connections.pop()
        except IndexError:
            connection = self._backend.prepare_read_connection(self.engine.connect())
        try:
            transaction = connection.begin()
            if snapshot:
                self._backend.begin_snapshot(connection)
            try:
                yield connection
            finally:
                if transaction.is_active:
                    transaction.rollback()
        except _DRIVER_ERRORS as exc:
            raise_translated(exc, "reading")
        finally:
            if (
                self._backend.keeps_idle_connections
                and not connection.invalidated
                and not connection.closed
                and len(self._idle_connections) < _IDLE_READERS_KEPT
                and not self._closing
            ):
                self._idle_connections.append(connection)
            else:
                connection.close()

    def _count_success(self) -> None:
        self.write_count += 1
        # Still holding the writer lock, right after a commit: the write connection is idle
        # and ours. Another would cost a pool checkout and its own read of the WAL index.
        connection = self._write_connection
        if connection is not None and self.checkpoint_every and self.write_count % self.checkpoint_every == 0:
            self._checkpoint_on(connection)

    def checkpoint(self) -> None:
        """Best-effort WAL checkpoint (PASSIVE) on SQLite; never raises."""
        try:
            connection = self.engine.connect()
        except Exception as exc:  # a checkpoint is an optimisation; never fail for it
            log.debug("WAL checkpoint skipped: %s", exc)
            return
        with connection:
            self._checkpoint_on(connection)

    def _checkpoint_on(self, connection: Connection) -> None:
        try:
            self._backend.checkpoint(connection)
        except Exception as exc:  # a checkpoint is an optimisation; never fail a write for it
            log.debug("WAL checkpoint skipped: %s", exc)

    def close(self) -> None:
        """Checkpoint (SQLite) and release the connections this unit of work holds.

        The engine's pool is disposed only when the engine is ours (``owns_engine``);
        an engine the caller supplied keeps its pool for the caller's other users.
        """
        with self._lock:
            self._closing = True
            while self._idle_connections:
                self._idle_connections.pop().close()
            if self._write_connection is not None:
                self._write_connection.close()
                self._write_connection = None
            self.checkpoint()
            if self.owns_engine:
                self.engine.dispose()


def _driver_in_transaction(connection: Connection) -> bool:
    """Whether the DBAPI connection itself says a transaction is open (sqlite3 does)."""
    return bool(getattr(connection.connection.driver_connection, "in_transaction", False))


def _commit(transaction: RootTransaction) -> None:
    """Commit; a connection lost during ``COMMIT`` leaves the outcome unknown, so say so."""
    try:
        transaction.commit()
    except _DRIVER_ERRORS as exc:
        if not is_server_unreachable(exc):
            raise
        raise ServerUnavailable(
            "the database server dropped the connection during COMMIT: the write may or may "
            f"not have been applied; check before repeating it ({exc.__class__.__name__})",
            outcome_unknown=True,
        ) from exc


def _forget_connections(uow: UnitOfWork) -> list[object]:
    """In a forked child: drop the parent's connections, pooled or held (see fork_safety)."""
    inherited: list[object] = [
        uow._idle_connections,
        uow._write_connection,
        uow._write_session,
        uow.engine.pool,
    ]
    uow._idle_connections = []
    uow._write_connection = None
    uow._write_session = orm.Session()
    # A new, empty pool; the old one and its connections stay with the forgotten ones.
    uow.engine.dispose(close=False)
    return inherited
