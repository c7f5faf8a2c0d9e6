"""The asyncio store's appends on SQLite: handed to a worker thread a batch at a time.

A store call on a worker thread costs two thread wake-ups (the worker's, then the
loop's), about 100 µs on these machines, and a commit holds one worker per waiting
write. Appends do better queued on the loop: every write submitted while a batch is
being committed waits in :class:`WriteBatcher`, and when that batch ends the next one —
all of them, up to :data:`MAX_BATCH` — goes to one worker thread, which runs it through
the unit of work's group commit (:meth:`~hermes_store.uow.unit_of_work.UnitOfWork.run_queued`:
one transaction, one fsync, each write its own result, error and attempts, shared with
the writes of other threads). One hop there and back per batch, not per write.

Order: writes run in the order they were submitted, so a task's appends to its session
keep their order. Cancellation: a submitted write is carried out whole; cancelling its
caller cancels only the caller's future (an error nobody will see then is logged), and
:meth:`WriteBatcher.drain` waits for every write submitted.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hermes_store.uow.group_commit import QueuedWrite
from hermes_store.uow.unit_of_work import UnitOfWork
from hermes_store.uow.worker_threads import WorkerThreads, report_orphaned_failure

MAX_BATCH = 256
"""The most writes one batch (one transaction) takes; the rest wait for the next, so a
burst never holds the write lock for long against other processes."""

_Pending = tuple[QueuedWrite[Any], "asyncio.Future[Any]"]


class WriteBatcher:
    """Core-connection writes queued on one event loop, committed a batch at a time."""

    def __init__(self, unit_of_work: UnitOfWork, threads: WorkerThreads) -> None:
        self._unit_of_work = unit_of_work
        self._threads = threads
        self._pending: list[_Pending] = []
        self._in_flight = False
        self._scheduled = False
        # Set while nothing is pending, scheduled or in flight (loop side only).
        self._idle = asyncio.Event()
        self._idle.set()

    def submit(self, work: Any, operation: str) -> asyncio.Future[Any]:
        """Queue ``work`` (a function of a Core connection); the future has its result or
        error once its transaction has committed (or failed)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append((QueuedWrite(work, operation, False), future))
        self._idle.clear()
        if not self._in_flight and not self._scheduled:
            # Not at once: the tasks a batch's end woke up run in the same turn of the
            # loop, and each is about to submit its next write. Dispatching the first
            # alone would make a batch of one, then one of all the others.
            self._scheduled = True
            loop.call_soon(self._dispatch, loop)
        return future

    def _dispatch(self, loop: asyncio.AbstractEventLoop) -> None:
        # Called only with writes pending and no batch in flight (submit, _finished).
        self._scheduled = False
        batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
        try:
            job = self._threads.submit(self._unit_of_work.run_queued, [w for w, _ in batch])
        except RuntimeError as exc:  # the worker threads are shut down: the store is closed
            # Nothing will run the writes still waiting either: they fail alike.
            batch, self._pending = batch + self._pending, []
            _settle(batch, exc)
            self._idle.set()
            return
        self._in_flight = True
        job.add_done_callback(lambda done: self._finished(loop, batch, done))

    def _finished(
        self, loop: asyncio.AbstractEventLoop, batch: list[_Pending], job: asyncio.Future[None]
    ) -> None:
        self._in_flight = False
        _settle(batch, None if job.cancelled() else job.exception())
        if self._pending:
            self._dispatch(loop)
        else:
            self._idle.set()

    async def drain(self) -> None:
        """Wait until every write submitted so far has its outcome."""
        await self._idle.wait()


def _settle(batch: list[_Pending], failure: BaseException | None) -> None:
    """Give each write's future its outcome; ``failure`` for those the batch never ended."""
    for write, future in batch:
        if future.cancelled():
            if write.error is not None:
                report_orphaned_failure(write.error)
            continue
        if future.done():
            continue
        if not write.done:
            future.set_exception(failure or RuntimeError(f"{write.operation}: the write was not run"))
        elif write.error is not None:
            future.set_exception(write.error)
        else:
            future.set_result(write.result)
