"""``AsyncSessionDB(db)``: Hermes' thin asyncio door onto a synchronous ``SessionDB``.

Hermes' gateway wraps its store in it and awaits every call, which then runs in a worker
thread (``asyncio.to_thread``) so the event loop never blocks on the database. It is not
:class:`hermes_store.aio.AsyncSessionDB`, the store's own asyncio face with its own
engine: this wrapper forwards to whatever object it is given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from types import ModuleType
from typing import Any

from hermes_store.drop_in.patchable import through_hermes_state
from hermes_store.drop_in.served_hermes import check_hermes_served


class AsyncSessionDB:
    """Forwards attribute access to the wrapped store ``_db``.

    Plain attributes come back as they are; a method comes back as a coroutine function
    that runs the call with ``asyncio.to_thread``. The gateway also reaches ``_db``
    directly for calls it makes from its own worker threads, so that name is kept.
    """

    def __init__(self, db: Any) -> None:
        """Wrap ``db``; an unserved Hermes is refused here as at ``SessionDB(...)``."""
        check_hermes_served()
        self._db = db

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._db, name)
        if not callable(attribute):
            return attribute
        return _offloaded(attribute)


def _offloaded(function: Callable[..., Any]) -> Callable[..., Coroutine[Any, Any, Any]]:
    async def run_in_thread(*args: Any, **kwargs: Any) -> Any:
        return await _asyncio_module().to_thread(function, *args, **kwargs)

    return run_in_thread


def _asyncio_module() -> ModuleType:
    """The ``asyncio`` that ``hermes_state`` names: Hermes' tests replace
    ``hermes_state.asyncio.to_thread`` to watch the offloading."""
    named = through_hermes_state("asyncio", asyncio)
    return named if isinstance(named, ModuleType) else asyncio
