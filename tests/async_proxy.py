"""A sync-looking ``AsyncSessionDB``, so the SessionDB behavioural suite drives both APIs.

:class:`BlockingAsyncSessionDB` runs an :class:`~hermes_store.aio.AsyncSessionDB` on a
private event loop in a thread of its own; every coroutine method is exposed as a plain
method that submits the coroutine to that loop and waits for its result (or error).
Calls from several threads run concurrently on the one loop, as tasks of a service do.

``engine`` is the async engine's ``sync_engine``, where SQLAlchemy's event API (and
instrumentation built on it) attaches to an asyncio engine. Raw access for arranging and
inspecting rows (``_conn``, ``_execute_write``: upstream's private sqlite3-level
primitives, not part of the async API) goes to a sync companion store on the same
database.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from sqlalchemy.engine import URL, Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from hermes_store import SessionDB
from hermes_store.aio import AsyncSessionDB
from hermes_store.db.urls import sync_driver_url

T = TypeVar("T")


class LoopThread:
    """An event loop running forever in a daemon thread, until :meth:`stop`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="async-store-loop", daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and wait for its outcome."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def stop(self) -> None:
        """Stop the loop and join its thread."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class BlockingAsyncSessionDB:
    """Looks like a ``SessionDB``; every call is an ``AsyncSessionDB`` coroutine awaited."""

    def __init__(
        self,
        target: str | os.PathLike[str] | URL | None = None,
        *,
        runner: LoopThread | None = None,
        engine: AsyncEngine | None = None,
    ) -> None:
        # A runner passed in is the caller's loop (it outlives this store), and so is an
        # engine: its pooled connections belong to that loop.
        self._owns_runner = runner is None
        self._runner = runner or LoopThread()
        self.async_db: AsyncSessionDB = self._runner.run(self._open(target, engine))
        self._companion: SessionDB | None = None

    @staticmethod
    async def _open(
        target: str | os.PathLike[str] | URL | None, engine: AsyncEngine | None
    ) -> AsyncSessionDB:
        return await AsyncSessionDB(target, engine=engine).open()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.async_db, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute

        def blocking(*args: Any, **kwargs: Any) -> Any:
            return self._runner.run(attribute(*args, **kwargs))

        return blocking

    @property
    def engine(self) -> Engine:
        """The async store's ``AsyncEngine.sync_engine``: where event listeners and
        instrumentation (OpenTelemetry's included) attach for an asyncio engine."""
        return self.async_db.sync_engine

    def _sync_companion(self) -> SessionDB:
        if self._companion is None:
            self._companion = SessionDB(url=sync_driver_url(self.async_db.engine.url))
        return self._companion

    @property
    def _conn(self) -> Any:
        return self._sync_companion()._conn

    def _execute_write(self, fn: Any) -> Any:
        return self._sync_companion()._execute_write(fn)

    def close(self) -> None:
        """Close the async store (waiting for calls in flight), the companion and the loop."""
        if self._runner.loop.is_closed():
            return
        self._runner.run(self.async_db.close())
        if self._companion is not None:
            self._companion.close()
        if self._owns_runner:
            self._runner.stop()
