"""The asyncio unit of work: the sync store's write contract, awaited.

:class:`AsyncUnitOfWork` runs the sync :class:`~hermes_store.uow.unit_of_work.UnitOfWork`
— the same attempt loop, retry classification, attempt budget, ``WriteConflict``,
``BEGIN IMMEDIATE`` and checkpoints — inside a greenlet on an
:class:`~sqlalchemy.ext.asyncio.AsyncEngine`. Three things differ: writers of one loop
queue on an :class:`asyncio.Lock` instead of a thread lock and the jittered pause
between attempts is ``asyncio.sleep`` (so the event loop is never blocked), and the
writer a nested write is recognised by is the store call's task, not the thread (all
tasks share one). SQLite's busy timeout is spent in aiosqlite's worker thread.

Every call runs to completion even if the awaiting task is cancelled (see
:mod:`hermes_store.api.async_completion`): a write is either committed whole or not at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import orm
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from hermes_store.api.async_completion import CompletionGroup
from hermes_store.uow.async_bridge import GreenletLock, current_call, pause, run_in_greenlet
from hermes_store.uow.unit_of_work import (
    CHECKPOINT_EVERY_N_WRITES,
    MAX_ATTEMPTS,
    RETRY_MAX_S,
    RETRY_MIN_S,
    UnitOfWork,
)

T = TypeVar("T")


class LoopUnitOfWork(UnitOfWork):
    """The sync unit of work, for code running in a greenlet on an AsyncEngine's loop."""

    def __init__(self, engine: AsyncEngine, **policy: Any) -> None:
        super().__init__(engine.sync_engine, **policy)
        # Same critical sections as the sync store, but waiting on the loop, not a thread.
        self._lock = GreenletLock()  # type: ignore[assignment]

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
        self.sync = LoopUnitOfWork(
            engine,
            max_attempts=max_attempts,
            retry_min_s=retry_min_s,
            retry_max_s=retry_max_s,
            checkpoint_every=checkpoint_every,
            owns_engine=owns_engine,
        )
        self._calls = CompletionGroup()

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

    async def read(self, work: Callable[[orm.Session], T]) -> T:
        """Run ``work(session)`` in a read transaction that never takes the write lock."""

        def in_read_session() -> T:
            with self.sync.read() as session:
                return work(session)

        return await self.run(in_read_session)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run synchronous store code that uses :attr:`sync`, to completion, on the loop."""
        return await self._calls.run(run_in_greenlet(fn, *args, **kwargs))

    async def checkpoint(self) -> None:
        """Best-effort PASSIVE WAL checkpoint on SQLite (never raises)."""
        await self.run(self.sync.checkpoint)

    async def drain(self) -> None:
        """Wait for every call in flight, including those whose callers were cancelled."""
        await self._calls.drain()

    async def close(self) -> None:
        """Wait for calls in flight, checkpoint (SQLite) and release the connections held.

        The engine's pool is disposed only when the engine is ours (``owns_engine``).
        """
        await self.drain()
        await run_in_greenlet(self.sync.close)
        if self.sync.owns_engine:
            await self.engine.dispose()
