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
import math
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
from hermes_store.db.driver_transaction import (
    DriverTransaction,
    abandon_driver_transaction,
    begin_driver_transaction,
    end_driver_transaction,
    in_driver_transaction,
)
from hermes_store.db.engine import connect_for_writes
from hermes_store.db.execution import driver_execute
from hermes_store.db.execution_options import NO_BEGIN_OPTION
from hermes_store.db.server_errors import is_server_unreachable
from hermes_store.db.sqlite_errors import is_retryable_conflict, raise_translated, translate
from hermes_store.errors import NestedWrite, ServerUnavailable, StoreClosed, WriteConflict
from hermes_store.uow.fork_safety import forget_in_child, quiesce_for_fork
from hermes_store.uow.group_commit import QueuedWrite, WriteQueue

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
GATHER_MAX_S = 0.002
"""The longest a group commit waits for the last group's writers to queue again."""


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
        self._backend = backend_for(engine)
        self._reader = orm.sessionmaker(bind=engine, expire_on_commit=False)
        self._idle_readers: list[orm.Session] = []
        self._idle_connections: list[Connection] = []
        self._closing = False
        # Writes are serialised in-process anyway, so one connection serves them all, kept
        # open like upstream's: no pool checkout and reset per write on the hot path.
        self._write_connection: Connection | None = None
        self._write_connection_taken: Any = None  # the backend's take_write_connection()
        self._write_session = orm.Session()
        self._lock = self._new_writer_lock()
        # The thread inside write(), so that a nested write fails instead of deadlocking.
        self._writer: int | None = None
        # The group being led broke once: its members now run in savepoints (_run_joined).
        self._isolating = False
        self.groups_commits = self._backend.groups_commits  # uow/group_commit.py
        self._driver_write_begin = self._backend.driver_write_begin
        # The write connection's driver-run transactions, reused from one to the next.
        self._driver_transaction: DriverTransaction | None = None
        self._queue = WriteQueue()
        self._last_group_size = 0
        self._last_attempt_s = 0.0
        self.write_count = 0
        self.retry_count = 0
        # The write count at which the next checkpoint is due (never, when checkpoint_every is 0).
        self._checkpoint_due: float = checkpoint_every or math.inf
        forget_in_child(self, _forget_connections)
        quiesce_for_fork(self, _pause_writes, _resume_writes)

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
        # A writer alone (see _run_alone) skips the queue that _write joins.
        if (
            self.groups_commits
            and self._last_group_size <= 1
            and not self._queue.waiting
            and self._lock.acquire(blocking=False)
        ):
            return self._run_alone(work, operation)
        return self._write(work, operation, with_session=False)

    def _write(self, work: Callable[[Any], T], operation: str, *, with_session: bool) -> T:
        # ORM-session writes run alone (a session's pending objects and flush belong to
        # one write); the facade's writes all use a Core connection and join.
        joins = self.groups_commits and not with_session
        write: QueuedWrite[T] = QueuedWrite(work, operation, with_session)
        self._run_writes([write], joins=joins, gathers=True)
        return write.outcome()

    def _run_alone(self, work: Callable[[Connection], T], operation: str) -> T:
        """Run the Core-connection write ``work`` of a writer alone, the writer lock
        already taken (released here).

        The group-commit queue is for writers that meet: one that finds the queue empty
        and the lock free, while the last group was a single write, has nobody to group
        with, so it skips the queue and its bookkeeping (about a tenth of an append's
        Python work). Writers that arrive meanwhile queue as usual and form the next
        group; once a group of several has formed, every write queues again until the
        groups are back to one write each, so that waiting for a group's writers to
        return (:meth:`_gather`) keeps working under contention. A nested write cannot get
        here: the writer's own thread holds the lock, so its ``acquire`` fails and the
        queued path raises :class:`NestedWrite`.

        The first attempt runs directly; a driver error it meets (a lock, a dropped
        connection) goes on as any write's would, with a :class:`QueuedWrite` keeping
        its attempts.
        """
        try:
            self._writer = self._caller()
            try:
                # Not _connection()'s test of a kept connection (two property calls): a
                # write connection found dead fails its attempt, which discards it
                # (_end_failed_transaction), and the retry opens another.
                connection = self._write_connection
                if connection is None:
                    connection = self._connection()
                try:
                    transaction = self._begin(connection)
                    result = work(connection)
                    _end(connection, transaction)
                except BaseException:
                    self._end_failed_transaction(connection)
                    raise
            except _DRIVER_ERRORS as exc:
                return self._retry_alone(QueuedWrite(work, operation, False), exc)
            finally:
                self._writer = None
            count = self.write_count = self.write_count + 1  # _count_success(), inline
            if count >= self._checkpoint_due:
                self._checkpoint_after(count)
            return result
        finally:
            self._lock.release()

    def _retry_alone(self, write: QueuedWrite[T], first_error: BaseException) -> T:
        """:meth:`_run_alone` after its first attempt failed with ``first_error``: classified
        and retried as :meth:`_lead` does, still holding the writer lock."""
        self._writer = self._caller()
        try:
            self._isolating = False
            pause = self._after_failed_attempt([write], first_error)
            while not write.done:
                if pause is not None:
                    self._pause(pause)
                pause = self._run_group([write], [write])
        finally:
            self._writer = None
        return write.outcome()

    def run_queued(self, writes: list[QueuedWrite[Any]]) -> None:
        """Run ``writes`` (Core-connection writes handed over together, as the asyncio
        store's batch is) and return once every one of them has its outcome.

        They join the group commit like the writes of other threads: queued in the given
        order and committed in the same transaction where the backend groups commits
        (SQLite), each keeping its own result, error and attempt count. Outcomes are in
        the writes (:meth:`QueuedWrite.outcome`); nothing is raised here except an
        interruption, which also ends the writes of the batch that had not finished.
        """
        if writes:
            # A batch arrives whole: waiting for more writers to queue would only delay it.
            self._run_writes(writes, joins=self.groups_commits, gathers=False)

    def _run_writes(self, own: list[QueuedWrite[Any]], *, joins: bool, gathers: bool) -> None:
        caller = self._caller()
        if self._writer == caller:
            raise NestedWrite(own[0].operation)
        if joins and not self._queue.wait_for_turn(own):
            return  # committed (or refused) in a group another thread led
        try:
            with self._lock:
                self._writer = caller
                try:
                    self._lead(own, joins, gathers)
                finally:
                    self._writer = None
        finally:
            if joins:
                self._queue.release()

    def _lead(self, own: list[QueuedWrite[Any]], joins: bool, gathers: bool) -> None:
        """Holding the writer lock: run groups (with retries) until ``own`` are all done.

        Each round takes every queued write, so writes that arrived during a commit or a
        retry pause join the next attempt. The pause between attempts is taken holding the
        lock: the other writers of this process would only meet the same lock in SQLite.
        """
        self._isolating = False
        while not _all_done(own):
            if joins and gathers:
                self._gather()
            group = self._queue.pending() if joins else [w for w in own if not w.done][:1]
            started = time.perf_counter()
            pause = self._run_group(group, own)
            if joins and gathers:
                # The rhythm of writers that come back one by one (threads), not of batches.
                self._last_group_size = len(group)
                self._last_attempt_s = time.perf_counter() - started
            if pause is not None and not _all_done(own):
                self._pause(pause)

    def _gather(self) -> None:
        """Before a group starts, give the last group's writers a moment to queue again.

        Writers that were in the last group are back in the store a few hundred µs after
        it committed with their next write; without this wait they would form a group of
        their own one commit later (two half-size groups, twice the fsyncs). The wait
        ends as soon as as many writes are queued as the last group had, and never lasts
        longer than the last attempt took (capped at :data:`GATHER_MAX_S`): a writer that
        stopped writing costs at most that once. A writer alone never waits.
        """
        expected = self._last_group_size
        if expected > 1 and len(self._queue) < expected:
            self._queue.gather(expected, min(GATHER_MAX_S, self._last_attempt_s))

    def _run_group(self, group: list[QueuedWrite[Any]], own: list[QueuedWrite[Any]]) -> float | None:
        """One attempt at ``group``; every write that ends gets its outcome. Returns how
        long to pause before the next attempt (``None``: go on at once)."""
        try:
            committed = self._attempt(group)
        except _GroupBroken:
            self._isolating = True
            return None  # the write that failed has its error; the others run again
        except _DRIVER_ERRORS as exc:
            return self._after_failed_attempt(group, exc)
        except Exception as exc:
            # Raised by the only write of the group, or by BEGIN/COMMIT for all of them.
            for write in group:
                write.fail(exc)
            return None
        except BaseException as exc:
            # Interrupted (KeyboardInterrupt, a cancelled task): the others were rolled back
            # with it and stay queued for the next leader; only the leader's own writes
            # end, with the interruption their caller is about to see.
            for write in own:
                if not write.done:
                    write.fail(exc)
            raise
        for write, result in committed:
            write.succeed(result)
        self._count_success(len(committed))
        return None

    def _after_failed_attempt(self, group: list[QueuedWrite[Any]], exc: BaseException) -> float | None:
        """Classify a driver error that rolled the whole attempt back (the write contract)."""
        if is_server_unreachable(exc):
            now = time.monotonic()
            for write in group:
                write.reconnect_deadline = write.reconnect_deadline or now + self.reconnect_wait_s
                if now >= write.reconnect_deadline:
                    write.fail(_translated(exc, write.operation))
        elif not is_retryable_conflict(exc):
            for write in group:
                write.fail(_translated(exc, write.operation))
        else:
            for write in group:
                write.conflicts += 1
                if write.conflicts >= self.max_attempts:
                    write.fail(WriteConflict(write.operation, self.max_attempts, exc))
        if all(write.done for write in group):
            return None
        self.retry_count += 1
        return random.uniform(self.retry_min_s, self.retry_max_s)

    def _caller(self) -> int:
        """Who is writing: the thread (the asyncio unit of work says: the store call)."""
        return threading.get_ident()

    def _pause(self, seconds: float) -> None:
        """Wait between attempts (the asyncio unit of work waits without blocking its loop)."""
        time.sleep(seconds)

    def _connection(self) -> Connection:
        connection = self._write_connection
        if connection is None or connection.closed or connection.invalidated:
            self._write_connection = None
            # Only here, where a write connection is opened: close() gave the last one
            # back, so a write after it always gets this far, and appends pay nothing.
            if self._closing:
                raise StoreClosed()
            connection = connect_for_writes(self.engine)
            if self._driver_write_begin is not None:
                # Its transactions are the driver's (_begin): SQLAlchemy's send no BEGIN.
                connection.execution_options(**{NO_BEGIN_OPTION: True})
            try:
                self._write_connection_taken = self._backend.take_write_connection(connection)
            except BaseException:
                connection.close()
                raise
            self._write_connection = connection
            self._write_session = orm.Session(bind=connection, expire_on_commit=False)
        return connection

    def _attempt(self, group: list[QueuedWrite[Any]]) -> list[tuple[QueuedWrite[Any], Any]]:
        """One try: BEGIN (IMMEDIATE on SQLite), run every write, COMMIT; roll back on error.

        A write alone runs as it always did; in a group, one that raises ends the attempt
        (:meth:`_run_joined`). Returns the writes in the committed transaction, with their
        results.
        """
        connection = self._connection()
        session = self._write_session
        joined = len(group) > 1
        committed: list[tuple[QueuedWrite[Any], Any]] = []
        sealed = False
        try:
            transaction = self._begin(connection)
            for write in group:
                if joined:
                    if self._run_joined(connection, write):
                        committed.append((write, write.result))
                elif write.with_session:
                    result = write.work(session)
                    session.flush()
                    committed.append((write, result))
                else:
                    committed.append((write, write.work(connection)))
            if joined:
                members = [write for write, _ in committed]
                if not self._queue.seal(members):
                    raise _GroupBroken  # a member's caller was interrupted: not committed
                sealed = True
            try:
                _end(connection, transaction)
            except ServerUnavailable as lost:
                if lost.outcome_unknown and not joined:
                    lost.uncommitted_result = committed[0][1]  # what to look for (see the error)
                raise
            return committed
        except BaseException:
            if sealed:
                self._queue.unseal([write for write, _ in committed])
            self._end_failed_transaction(connection)
            raise
        finally:
            if not joined and group[0].with_session:
                # Reused across writes (cheaper than a new one each time); close() empties it.
                session.close()

    def _begin(self, connection: Connection) -> RootTransaction | DriverTransaction:
        """Begin an attempt's transaction: the driver's where the backend says so (SQLite,
        see :attr:`~hermes_store.db.backends.Backend.driver_write_begin`), SQLAlchemy's
        otherwise."""
        if self._driver_write_begin is not None:
            self._driver_transaction = begin_driver_transaction(
                connection, self._driver_write_begin, self._driver_transaction
            )
            return self._driver_transaction
        return connection.begin()

    def _run_joined(self, connection: Connection, write: QueuedWrite[Any]) -> bool:
        """Run one write of a group; its result waits in ``write.result`` for the COMMIT.
        ``False``: the write was withdrawn or failed, and left nothing behind.

        A write that fails its own checks (a missing session, a value refused, any error
        of its own) gets that error, and the transaction is rolled back: the rest of the
        group runs again at once without it (:class:`_GroupBroken`), so its half-done
        statements never reach the others' commit. That costs nothing while no write
        fails, where a savepoint around each would cost two statements per write. Once a
        group broke, though, its rerun keeps each write inside a savepoint of its own
        (:attr:`_isolating`), so that further failures cost no further reruns. Lock and
        connection errors are the whole transaction's: they propagate.
        """
        if write.done:
            return False  # withdrawn by its interrupted caller
        if self._isolating:
            return self._run_isolated(connection, write)
        try:
            write.result = write.work(connection)
        except _DRIVER_ERRORS as exc:
            if is_retryable_conflict(exc) or is_server_unreachable(exc):
                raise
            write.fail(_translated(exc, write.operation))
            raise _GroupBroken from exc
        except Exception as exc:
            write.fail(exc)
            raise _GroupBroken from exc
        return True

    def _run_isolated(self, connection: Connection, write: QueuedWrite[Any]) -> bool:
        """:meth:`_run_joined` inside a savepoint: a write that fails its own checks is
        rolled back to it alone, and the group goes on."""
        if not connection.in_transaction():
            # SQLAlchemy rolls back a connection it believes outside a transaction when a
            # statement fails, which would end the driver's transaction and the
            # savepoint with it; its bookkeeping transaction sends no BEGIN of its own
            # here (NO_BEGIN_OPTION) and ends with the driver's.
            connection.begin()
        driver_execute(connection, "SAVEPOINT hermes_group_member")
        try:
            write.result = write.work(connection)
        except _DRIVER_ERRORS as exc:
            if is_retryable_conflict(exc) or is_server_unreachable(exc):
                raise
            error: Exception = _translated(exc, write.operation)  # type: ignore[assignment]
        except Exception as exc:
            error = exc
        else:
            driver_execute(connection, "RELEASE SAVEPOINT hermes_group_member")
            return True
        driver_execute(connection, "ROLLBACK TO SAVEPOINT hermes_group_member")
        driver_execute(connection, "RELEASE SAVEPOINT hermes_group_member")
        write.fail(error)
        return False

    def _end_failed_transaction(self, connection: Connection) -> None:
        """Leave no transaction open after a failed attempt, whatever SQLAlchemy believes.

        A COMMIT refused with SQLITE_BUSY (a reader holding SHARED in rollback-journal
        mode) keeps SQLite's transaction open while SQLAlchemy marks it finished, so its
        rollback() sends nothing; the next BEGIN would then fail for good and this process
        would keep the lock from every other. The driver's own flag tells the truth: such a
        connection is discarded (closing it makes SQLite roll back and release the lock).
        """
        try:
            if self._driver_write_begin is not None and in_driver_transaction(connection):
                # An invalidated connection has no driver connection left to ask (or to
                # roll back), but its transaction is forgotten all the same: the record
                # would otherwise keep the dead connection for the life of the process.
                if not connection.invalidated and _driver_reports_transaction(connection):
                    end_driver_transaction(connection, commit=False)
                else:  # never begun, ended by the driver (a failed COMMIT can end it), or lost
                    abandon_driver_transaction(connection)
            # A transaction whose COMMIT failed is inactive but still open: end it too.
            leftover = connection.get_transaction()
            if leftover is not None:
                leftover.rollback()
            if not connection.invalidated and _driver_reports_transaction(connection):
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
            if self._closing:  # close() emptied the idle sessions: after it, reads get here
                raise StoreClosed() from None
            session = self._reader()
        try:
            yield session
        except _DRIVER_ERRORS as exc:
            raise_translated(exc, "reading")
        finally:
            # close() ends the transaction and returns the connection to the pool; the
            # emptied session object is kept for the next read (cheaper than a new one).
            session.close()
            if len(self._idle_readers) < _IDLE_READERS_KEPT and not self._closing:
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
            if self._closing:  # as in read()
                raise StoreClosed() from None
            try:
                connection = self._backend.prepare_read_connection(self.engine.connect())
            except _DRIVER_ERRORS as exc:  # a server down or shutting down, met while connecting
                raise_translated(exc, "reading")
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

    def _count_success(self, writes: int = 1) -> None:
        count = self.write_count = self.write_count + writes
        if count >= self._checkpoint_due:
            self._checkpoint_after(count)

    def _checkpoint_after(self, count: int) -> None:
        """Checkpoint now that ``count`` writes were made (one is due every
        ``checkpoint_every``), and say when the next is due."""
        every = self.checkpoint_every
        self._checkpoint_due = count - count % every + every
        # Still holding the writer lock, right after a commit: the write connection is idle
        # and ours. Another would cost a pool checkout and its own read of the WAL index.
        connection = self._write_connection
        if connection is not None:
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

    def _give_back_write_connection(self, connection: Connection) -> None:
        """Undo what the backend set on the write connection, then close it (back to the pool)."""
        try:
            if not connection.closed and not connection.invalidated:
                self._backend.give_back_write_connection(connection, self._write_connection_taken)
        except _DRIVER_ERRORS as exc:  # a connection that cannot be restored is not reused
            log.debug("write connection discarded: %s", exc)
            connection.invalidate()
        finally:
            connection.close()

    def _new_writer_lock(self) -> threading.Lock:
        """The lock the writers of this process queue on (a fresh one in a forked child)."""
        return threading.Lock()

    def _pause_for_fork(self) -> bool:
        """Before a fork: take the writer lock, so that no write of this process is mid-way
        (see fork_safety); ``True`` when taken, for :meth:`_resume_after_fork`. Not when
        the forking thread is the writer (a fork from inside a write's own work), nor after
        waiting :data:`FORK_PAUSE_S` in vain (logged)."""
        if self._writer == self._caller():
            return False
        if self._lock.acquire(timeout=FORK_PAUSE_S):
            return True
        log.warning("forking while a write of this process is still running after %.0f s", FORK_PAUSE_S)
        return False

    def _resume_after_fork(self) -> None:
        """In the parent, after a fork :meth:`_pause_for_fork` paused for."""
        self._lock.release()

    def close(self) -> None:
        """Checkpoint (SQLite) and release the connections this unit of work holds.

        The engine's pool is disposed only when the engine is ours (``owns_engine``);
        an engine the caller supplied keeps its pool for the caller's other users.
        """
        with self._lock:
            self._closing = True
            self._idle_readers.clear()  # their connections are back in the pool already
            while self._idle_connections:
                self._idle_connections.pop().close()
            if self._write_connection is not None:
                self._give_back_write_connection(self._write_connection)
                self._write_connection = None
            self.checkpoint()
            if self.owns_engine:
                self.engine.dispose()


def _all_done(writes: list[QueuedWrite[Any]]) -> bool:
    # A loop, not all() over a generator: this runs twice per write on the hot path.
    for write in writes:  # noqa: SIM110
        if not write.done:
            return False
    return True


def _driver_reports_transaction(connection: Connection) -> bool:
    """Whether the DBAPI connection itself says a transaction is open (sqlite3 does)."""
    return bool(getattr(connection.connection.driver_connection, "in_transaction", False))


class _GroupBroken(Exception):
    """A joined write failed on its own: the transaction is rolled back, the rest reruns."""


def _translated(error: BaseException, operation: str) -> BaseException:
    """What the caller sees for a driver error (:func:`translate`), chained to it."""
    translated = translate(error, operation)
    if translated is not error:
        translated.__cause__ = error
    return translated


def _end(connection: Connection, transaction: RootTransaction | DriverTransaction) -> None:
    """Commit an attempt's transaction, the driver's or SQLAlchemy's."""
    if isinstance(transaction, DriverTransaction):
        end_driver_transaction(connection, commit=True, transaction=transaction)
    else:
        _commit(transaction)


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


FORK_PAUSE_S = 30.0
"""How long a fork waits for the write in progress to commit before forking anyway."""


def _pause_writes(uow: UnitOfWork) -> bool:
    return uow._pause_for_fork()


def _resume_writes(uow: UnitOfWork) -> None:
    uow._resume_after_fork()


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
    uow._write_connection_taken = None
    uow._driver_transaction = None
    uow._write_session = orm.Session()
    # Only the forking thread lives on in the child, but the others' state was copied: a
    # writer lock one of them held would never be released, a write one of them queued
    # would lead a group nobody runs, and its thread id would make the child's first write
    # look nested. The child starts with none of them.
    uow._lock = uow._new_writer_lock()
    uow._queue = WriteQueue()
    uow._writer = None
    # A new, empty pool; the old one and its connections stay with the forgotten ones.
    uow.engine.dispose(close=False)
    return inherited
