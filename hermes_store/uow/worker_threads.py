"""The asyncio store's worker threads on SQLite: one wake-up there, one back, per call.

``loop.run_in_executor`` costs about 120 µs a round trip on these machines (two
``concurrent.futures`` futures chained through locks and callbacks, then
:func:`asyncio.shield` for cancellation: about 140 µs in all). :class:`WorkerThreads`
does the same job in about 60 µs: the call goes to an idle thread through a C
``queue.SimpleQueue``, and its outcome comes back to the loop with a single
``call_soon_threadsafe`` that sets the caller's future.

Cancellation, as for every store call (:mod:`hermes_store.uow.async_completion`):
cancelling the awaiting task cancels only its future; the call itself runs on to the
end on its thread (a write commits whole or rolls back whole), its outcome is then
dropped, and an error nobody will see is logged. :meth:`WorkerThreads.drain` waits for
every call handed over, whether or not its caller still waits.

Threads start on demand, up to ``max_threads``, and stay until :meth:`shutdown`. They
are daemons, so a store that was never closed cannot hold the interpreter's exit up. A
write still running at that moment has no caller left waiting (the loop has ended) and
is never acknowledged; the process ending mid-transaction leaves SQLite's file as a
crash would, with that transaction rolled back (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

_Job = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]
]
_names = itertools.count()
SHUTDOWN_WAIT_S = 1.0
"""How long :meth:`WorkerThreads.shutdown` waits, in all, for its threads to end."""


def report_orphaned_failure(error: BaseException | None) -> None:
    """Log the error of a store call whose caller stopped waiting (nobody else will see it)."""
    log.warning("a store call whose caller was cancelled failed: %r", error)


class WorkerThreads:
    """Up to ``max_threads`` threads running synchronous calls for one event loop."""

    def __init__(self, max_threads: int, name: str) -> None:
        if max_threads < 1:
            raise ValueError(f"max_threads must be at least 1, not {max_threads}")
        self.max_threads = max_threads
        self.name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        # A token put by a worker each time it is about to wait for a job, taken by a call
        # submitted then, which so needs no new thread (deque's append and pop are atomic).
        self._idle: collections.deque[None] = collections.deque()
        self._threads: list[threading.Thread] = []
        self._shut_down = False
        # Loop side only (the loop's thread): calls handed over and not yet delivered.
        self._in_flight = 0
        self._idle_loop_side = asyncio.Event()
        self._idle_loop_side.set()

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
        """Run ``fn(*args, **kwargs)`` on a worker thread; the future (of the running loop)
        gets its result or error. Raises ``RuntimeError`` after :meth:`shutdown`."""
        if self._shut_down:
            raise RuntimeError(f"{self.name}: cannot run a call after shutdown")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._in_flight += 1
        self._idle_loop_side.clear()
        self._jobs.put((loop, future, fn, args, kwargs))
        try:
            self._idle.pop()
        except IndexError:
            self._start_thread()
        return future

    def _start_thread(self) -> None:
        if len(self._threads) < self.max_threads:
            thread = threading.Thread(
                target=_work,
                args=(self._jobs, self._idle, self._delivered),
                name=f"{self.name}-{next(_names)}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def _delivered(self, future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
        # On the loop's thread, once per submitted call.
        self._in_flight -= 1
        if future.cancelled():
            if error is not None:
                report_orphaned_failure(error)
        elif error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
        if not self._in_flight:
            self._idle_loop_side.set()

    @property
    def in_flight(self) -> int:
        """Calls handed over whose outcome has not reached the loop yet."""
        return self._in_flight

    async def drain(self) -> None:
        """Wait until every call handed over so far has ended (its outcome delivered)."""
        await self._idle_loop_side.wait()

    def shutdown(self) -> None:
        """Stop the threads once they are idle; calls still queued are run first.

        Waits (up to :data:`SHUTDOWN_WAIT_S` in all) for the threads to end, so that a store
        closed after :meth:`drain` leaves no thread of its own running: a process that
        forks next must not carry one into the child in the middle of something (a thread
        inside SQLite holds its locks, and the child would wait for them forever). Idle
        threads end within microseconds of being told; one still busy with a call is
        left to finish on its own (a daemon)."""
        self._shut_down = True
        for _ in self._threads:
            self._jobs.put(None)
        deadline = time.monotonic() + SHUTDOWN_WAIT_S
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0))
        self._threads.clear()


def _work(
    jobs: queue.SimpleQueue[_Job | None],
    idle: collections.deque[None],
    deliver: Callable[[asyncio.Future[Any], Any, BaseException | None], None],
) -> None:
    """A worker thread's life: run jobs until told to stop."""
    while True:
        job = jobs.get()
        if job is None:
            return
        loop, future, fn, args, kwargs = job
        result: Any = None
        error: BaseException | None = None
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller, as an executor does
            error = exc
        try:
            loop.call_soon_threadsafe(deliver, future, result, error)
        except RuntimeError:  # the loop is closed: nobody is left to tell
            if error is not None:
                log.warning("a store call finished after its event loop closed: %r", error)
        del job, future, fn, args, kwargs, result, error
        idle.append(None)
