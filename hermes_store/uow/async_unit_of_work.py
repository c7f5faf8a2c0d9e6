"""The asyncio unit of work: the sync store's write contract, awaited.

:class:`AsyncUnitOfWork` runs the sync :class:`~hermes_store.uow.unit_of_work.UnitOfWork`
— the same attempt loop, retry classification, attempt budget, ``WriteConflict``,
``BEGIN IMMEDIATE``, group commit and checkpoints — in one of two ways:

* **SQLite**: a store call runs whole on a worker thread of the unit of work's own pool,
  on a sync engine for the same file — one hop from the loop and back per call, however
  many statements the call makes. Lock waits, SQLite's busy timeout and the pause between
  attempts all happen in that thread, never on the loop, and the writes of concurrent
  tasks join one group commit, exactly as the threads of a sync store do. Appends,
  prepared on the loop, go further (:meth:`AsyncUnitOfWork.write_batched`): the appends
  of all tasks wait on the loop while a batch commits and then go to one worker thread
  together — one hop per batch.
* **PostgreSQL** (real async I/O, psycopg's async mode or asyncpg): the same code runs in
  a greenlet on an :class:`~sqlalchemy.ext.asyncio.AsyncEngine` (:class:`LoopUnitOfWork`);
  writers of one loop queue on an :class:`asyncio.Lock`, the jittered pause is
  ``asyncio.sleep``, and the writer a nested write is recognised by is the store call's
  task.

Every call runs to completion even if the awaiting task is cancelled (see
:mod:`hermes_store.uow.async_completion`): a write is either committed whole or not at all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import orm
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import StaticPool

from hermes_store.db.engine import create_engine, sqlite_path
from hermes_store.db.urls import sync_driver_url
from hermes_store.uow.async_bridge import GreenletLock, current_call, pause, run_in_greenlet
from hermes_store.uow.async_completion import CompletionGroup
from hermes_store.uow.async_write_batch import WriteBatcher
from hermes_store.uow.unit_of_work import (
    CHECKPOINT_EVERY_N_WRITES,
    MAX_ATTEMPTS,
    RETRY_MAX_S,
    RETRY_MIN_S,
    UnitOfWork,
)
from hermes_store.uow.worker_threads import WorkerThreads

T = TypeVar("T")

WORKER_THREADS = 32
"""Worker threads of one SQLite :class:`AsyncUnitOfWork` for calls that write: how many run
at once (and so how many writes one group commit can gather, besides the batched appends);
the rest queue in the pool. A write waiting for another process's lock holds its thread."""

READ_THREADS = 4
"""Worker threads for calls that only read (:meth:`AsyncUnitOfWork.run_read`). Reads are
CPU work on this side: more threads than about twice the cores only make them fight for
the GIL (measured with 10 tasks searching on 2 cores: 2 threads 314 searches/s, 4 threads
285, 10 threads 220–285, 32 threads 228–280; the sync store in a pool of 10 threads
265–302). Kept apart from the writers' threads, a write waiting for a lock never delays
a read."""


def sqlite_store_engine(engine: AsyncEngine) -> Engine:
    """The sync engine a SQLite :class:`AsyncUnitOfWork` runs its calls on: the same
    database as ``engine``, with the sync store's settings (WAL, pragmas, BEGIN IMMEDIATE)."""
    url = sync_driver_url(engine.url)
    if sqlite_path(url) is None:
        # In memory: the database lives in its one connection, shared by the (single)
        # worker thread.
        return create_engine(url, prepare=True, poolclass=StaticPool)
    # A connection for each worker thread (writers' and readers') plus the write connection,
    # kept: no overflow connections opened (pragmas, WAL index) and closed again under bursts.
    return create_engine(url, prepare=True, pool_size=WORKER_THREADS + READ_THREADS + 1, max_overflow=0)


class LoopUnitOfWork(UnitOfWork):
    """The sync unit of work, for code running in a greenlet on an AsyncEngine's loop."""

    def __init__(self, engine: AsyncEngine, **policy: Any) -> None:
        super().__init__(engine.sync_engine, **policy)
        # Followers of a group commit sleep on a thread condition, which would stop the
        # loop; a database server commits connections in parallel anyway.
        self.groups_commits = False

    def _new_writer_lock(self) -> threading.Lock:
        # Same critical sections as the sync store, but waiting on the loop, not a thread.
        return GreenletLock()  # type: ignore[return-value]

    def _pause_for_fork(self) -> bool:
        # Nothing to wait for, and no way to: a database server keeps each transaction's
        # state on the server (the child forgets the parent's connections, see
        # fork_safety), and these writers only move on while the loop runs, which a fork
        # called from the loop's own thread stops.
        return False

    def _pause(self, seconds: float) -> None:
        pause(seconds)

    def _caller(self) -> int:
        # All tasks share the loop's thread; each store call runs in a task of its own.
        return current_call()

    # Cancellation inside an attempt (only when the call's own task is cancelled, e.g. at
    # loop shutdown) needs nothing extra: SQLAlchemy invalidates a connection whose
    # statement was interrupted by CancelledError, and the sync attempt then closes and
    # drops it — closing a SQLite connection rolls back whatever it had begun.


class AsyncUnitOfWork:
    """Retried write transactions and read transactions on an AsyncEngine, awaited.

    ``work`` functions are synchronous and receive an ORM :class:`~sqlalchemy.orm.Session`
    exactly as with :class:`~hermes_store.uow.unit_of_work.UnitOfWork` (so the same
    repository functions serve both). One instance belongs to one event loop.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        max_attempts: int = MAX_ATTEMPTS,
        retry_min_s: float = RETRY_MIN_S,
        retry_max_s: float = RETRY_MAX_S,
        checkpoint_every: int = CHECKPOINT_EVERY_N_WRITES,
        owns_engine: bool = True,
    ) -> None:
        self.engine = engine
        self.owns_engine = owns_engine
        policy: dict[str, Any] = {
            "max_attempts": max_attempts,
            "retry_min_s": retry_min_s,
            "retry_max_s": retry_max_s,
            "checkpoint_every": checkpoint_every,
        }
        self._threads: WorkerThreads | None = None
        self._read_threads: WorkerThreads | None = None
        self._batcher: WriteBatcher | None = None
        self.sync: UnitOfWork
        if engine.url.get_backend_name() == "sqlite":
            # The sync engine is always ours; ``engine`` stays for the caller's own use.
            self.sync = UnitOfWork(sqlite_store_engine(engine), owns_engine=True, **policy)
            in_memory = sqlite_path(engine.url) is None
            self._threads = WorkerThreads(1 if in_memory else WORKER_THREADS, "hermes-store")
            # In memory, one connection serves everything: one thread for reads and writes.
            self._read_threads = (
                self._threads if in_memory else WorkerThreads(READ_THREADS, "hermes-store-read")
            )
            self._batcher = WriteBatcher(self.sync, self._threads)
        else:
            self.sync = LoopUnitOfWork(engine, owns_engine=owns_engine, **policy)
        self._calls = CompletionGroup()

    @property
    def runs_on_threads(self) -> bool:
        """Whether calls run whole on worker threads (SQLite) rather than on the loop."""
        return self._threads is not None

    @property
    def sync_engine(self) -> Engine:
        """The sync engine the store's statements run on: where event listeners attach
        (``engine.sync_engine`` on PostgreSQL, the worker threads' engine on SQLite)."""
        return self.sync.engine

    @property
    def write_count(self) -> int:
        """Successful writes so far."""
        return self.sync.write_count

    @property
    def retry_count(self) -> int:
        """Attempts that found the database locked and were retried."""
        return self.sync.retry_count

    async def write(self, work: Callable[[orm.Session], T], operation: str) -> T:
        """Run ``work(session)`` in one write transaction and commit; retry it whole on lock.

        Same contract as :meth:`UnitOfWork.write`: lock/serialization errors are retried
        after a random 20–150 ms ``asyncio.sleep`` up to the attempt budget, then
        :class:`~hermes_store.errors.WriteConflict`; other errors roll back and propagate.
        Cancelling the caller does not stop a started write (it completes or rolls back
        whole); the caller sees ``CancelledError`` at once.
        """
        return await self.run(self.sync.write, work, operation)

    async def write_connection(self, work: Callable[[Connection], T], operation: str) -> T:
        """:meth:`write` with a Core :class:`~sqlalchemy.engine.Connection` for ``work``
        instead of an ORM session (as :meth:`UnitOfWork.write_connection`)."""
        return await self.run(self.sync.write_connection, work, operation)

    async def write_batched(self, work: Callable[[Connection], T], operation: str) -> T:
        """:meth:`write_connection` for a write prepared on the loop: on SQLite it waits on
        the loop with the writes of other tasks and goes to a worker thread with them, as
        one batch in one group commit (:mod:`hermes_store.uow.async_write_batch`); a
        server runs it as :meth:`write_connection` does. Same contract otherwise."""
        if self._batcher is None:
            return await self.write_connection(work, operation)
        # The batch's future is the caller's own: cancelling the caller cancels only that
        # future, and the write is carried out whole (WriteBatcher).
        return await self._batcher.submit(work, operation)  # type: ignore[no-any-return]

    async def read(self, work: Callable[[orm.Session], T]) -> T:
        """Run ``work(session)`` in a read transaction that never takes the write lock."""

        def in_read_session() -> T:
            with self.sync.read() as session:
                return work(session)

        return await self.run_read(in_read_session)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run synchronous store code that uses :attr:`sync` to completion: whole on a
        worker thread (SQLite), or in a greenlet whose driver I/O awaits on the loop."""
        return await self._run_on(self._threads, fn, *args, **kwargs)

    async def run_read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """:meth:`run` for code that only reads: on SQLite on the readers' own threads
        (:data:`READ_THREADS`), so reads never queue behind writes waiting for a lock."""
        return await self._run_on(self._read_threads, fn, *args, **kwargs)

    async def _run_on(
        self, threads: WorkerThreads | None, fn: Callable[..., T], *args: Any, **kwargs: Any
    ) -> T:
        if threads is None:
            return await self._calls.run(run_in_greenlet(fn, *args, **kwargs))
        # The thread's future is the caller's own: cancelling the caller cancels only that
        # future, and the call runs on to its end (WorkerThreads).
        return await threads.submit(fn, *args, **kwargs)

    def _thread_pools(self) -> list[WorkerThreads]:
        # In memory the readers' pool is the writers' one: each pool once.
        pools = [self._threads, self._read_threads]
        return [pool for index, pool in enumerate(pools) if pool is not None and pool not in pools[:index]]

    async def checkpoint(self) -> None:
        """Best-effort PASSIVE WAL checkpoint on SQLite (never raises)."""
        await self.run(self.sync.checkpoint)

    async def drain(self) -> None:
        """Wait for every call in flight, including those whose callers were cancelled."""
        await self._calls.drain()
        if self._batcher is not None:
            await self._batcher.drain()
        for threads in self._thread_pools():
            await threads.drain()

    async def close(self) -> None:
        """Wait for calls in flight, checkpoint (SQLite) and release the connections held.

        The engine's pool is disposed only when the engine is ours (``owns_engine``).
        """
        await self.drain()
        await self.run(self.sync.close)
        await self.release()

    async def release(self) -> None:
        """After :attr:`sync` is closed: stop the worker threads, dispose the engine if ours."""
        for threads in self._thread_pools():
            threads.shutdown()  # idle: every call has finished
        if self.owns_engine:
            await self.engine.dispose()
