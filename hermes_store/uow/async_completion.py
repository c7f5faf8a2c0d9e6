"""Calls that run to completion even when the task awaiting them is cancelled (PostgreSQL).

A store call on a server runs in a task of its own (on SQLite it runs on a worker thread:
:mod:`hermes_store.uow.worker_threads`); the caller awaits it through
:func:`asyncio.shield`. Cancelling the caller stops the *waiting* at once (the caller
sees ``CancelledError``) but never the call: a write that has been started is carried
out whole (committed, or rolled back on its own error), never stopped half-way, and
the connection it holds is left clean. ``drain()`` waits for every call still running,
which ``close()`` does before it releases the connections.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from hermes_store.uow.worker_threads import report_orphaned_failure

T = TypeVar("T")


class CompletionGroup:
    """The store's calls in flight, each shielded from its caller's cancellation."""

    def __init__(self) -> None:
        self._running: set[asyncio.Future[Any]] = set()
        # Calls whose caller stopped waiting: nobody else will see how they end.
        self._orphaned: set[asyncio.Future[Any]] = set()

    async def run(self, call: Awaitable[T]) -> T:
        """Run ``call`` (a coroutine: in its own task; or a worker thread's future) to
        completion; return its result or raise its error."""
        task = asyncio.ensure_future(call)
        self._running.add(task)
        task.add_done_callback(self._finished)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                self._orphaned.add(task)
            elif not task.cancelled() and task.exception() is not None:
                # It failed in the moment its caller was cancelled (a worker thread can
                # finish before the cancellation arrives): nobody else will see the error.
                report_orphaned_failure(task.exception())
            raise

    def _finished(self, task: asyncio.Future[Any]) -> None:
        self._running.discard(task)
        orphaned = task in self._orphaned
        self._orphaned.discard(task)
        if task.cancelled():
            return
        error = task.exception()  # retrieved, so asyncio never reports it as lost
        if error is not None and orphaned:
            report_orphaned_failure(error)

    async def drain(self) -> None:
        """Wait until every call started so far has finished (errors are its callers')."""
        while self._running:
            await asyncio.wait(list(self._running))

    def __len__(self) -> int:
        return len(self._running)
