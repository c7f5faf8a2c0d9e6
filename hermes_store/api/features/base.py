"""What every feature mixin may call on the store it is mixed into."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection

from hermes_store.db.execution import Bind
from hermes_store.errors import (
    CorruptDatabase,
    ReadOnlyStore,
    ServerUnavailable,
    StorageFull,
    StoreTimeout,
    WriteConflict,
)

T = TypeVar("T")

DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    sa_exc.DBAPIError,
    sqlite3.Error,
    WriteConflict,
    ReadOnlyStore,
    StorageFull,
    CorruptDatabase,
    ServerUnavailable,
    StoreTimeout,
)
"""What the database (not the caller) can make a statement fail with: driver errors and
the store's own errors that translate them (lock timeouts, full disk, lost server). The
features that answer like upstream Hermes when the database fails (a warning and
``False``, ``None`` or ``[]``) catch these, and only these."""


class FacadeBase:
    """The store's own primitives, implemented by :class:`~hermes_store.api.session_db.SessionDB`.

    A feature mixin derives from this class so that its methods type-check against the
    primitives: ``_write`` runs one retried write transaction, ``_query`` one read (a
    ``snapshot`` when several statements must agree).

    A mixin names its public methods in ``_ASYNC_READS`` and ``_ASYNC_WRITES``; the asyncio
    face gives each a coroutine that runs it on a read or a write worker.
    """

    _ASYNC_READS: ClassVar[tuple[str, ...]] = ()
    _ASYNC_WRITES: ClassVar[tuple[str, ...]] = ()

    def _write(self, work: Callable[[Connection], T], operation: str) -> T:
        raise NotImplementedError

    def _query(self, work: Callable[[Bind], T], snapshot: bool = False) -> T:
        raise NotImplementedError

    def _check_open(self) -> None:
        raise NotImplementedError

    def _step_aside(self, seconds: float) -> None:
        """Wait ``seconds`` between the transactions of a long job, the way the store's
        retries wait (on the asyncio face: without blocking the event loop)."""
        raise NotImplementedError

    @classmethod
    def _encode_content(cls, content: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def _decode_content(cls, content: Any) -> Any:
        raise NotImplementedError
