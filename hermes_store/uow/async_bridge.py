"""The seam between asyncio and the synchronous store code.

SQLAlchemy's asyncio extension runs synchronous ORM/Core code inside a greenlet and
turns every driver call made there into an ``await`` on the event loop (that is what
``AsyncConnection.run_sync`` does). hermes_store uses the same mechanism for whole
store operations: the repositories, the search and the unit of work run unchanged in a
greenlet on an :class:`~sqlalchemy.ext.asyncio.AsyncEngine`'s ``sync_engine``, and the
only things that differ from the sync store are the two places where it would block —
waiting for the in-process writer lock and sleeping between retries. Both are defined
here as awaits on the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from sqlalchemy.util import await_only, greenlet_spawn

T = TypeVar("T")


def run_in_greenlet(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Coroutine[Any, Any, T]:
    """A coroutine running ``fn(*args, **kwargs)`` where its driver I/O awaits on the loop."""
    return greenlet_spawn(fn, *args, **kwargs)


def current_call() -> int:
    """An id of the running store call, unique among calls in flight.

    Each call runs in a task of its own (see :mod:`hermes_store.uow.async_completion`), and
    greenlet code runs while the loop is executing that task.
    """
    return id(asyncio.current_task())


def pause(seconds: float) -> None:
    """Sleep ``seconds`` from greenlet code without blocking the event loop."""
    await_only(asyncio.sleep(seconds))


class GreenletLock:
    """A FIFO lock taken with ``with`` from greenlet code, waiting on the event loop.

    It stands in for the sync unit of work's ``threading.Lock``: tasks of one loop queue
    for the write connection here instead of fighting through SQLite's busy handler,
    and a task waiting for it lets every other task run.
    """

    def __init__(self) -> None:
        self._lock = asyncio.Lock()

    def __enter__(self) -> GreenletLock:
        await_only(self._lock.acquire())
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()
