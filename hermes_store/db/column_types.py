"""Column types that keep upstream's value encodings portable across backends.

SQLite stores whatever Python hands it in a TEXT column: strings with NUL bytes, numbers,
even ``bytes``. Other backends may not (PostgreSQL's ``text`` cannot hold a NUL), so the
column types ask the store's backend (:mod:`hermes_store.db.backends`) how to store and read
back message content and timestamps. On SQLite neither type adds any per-value work.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import REAL, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

SQLITE_CONTENT_SENTINEL = "\x00json:"
POSTGRES_CONTENT_SENTINEL = "\ue000json:"


class MessageContent(TypeDecorator[Any]):
    """``messages.content``: TEXT holding upstream's encodings on every backend."""

    impl = Text
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Any:
        """The backend's mapping to its stored form (``None``: values pass unchanged)."""
        from hermes_store.db.backends import backend_for

        return backend_for(dialect).content_bind_processor()

    def result_processor(self, dialect: Dialect, coltype: Any) -> Any:
        """The backend's mapping back from its stored form (``None``: unchanged)."""
        from hermes_store.db.backends import backend_for

        return backend_for(dialect).content_result_processor()


class Float8(TypeDecorator[float]):
    """An 8-byte float on every backend: ``REAL`` on SQLite (8 bytes there, as upstream
    declares it), ``double precision`` elsewhere (PostgreSQL's ``real`` has 4 bytes and
    would round timestamps to minutes).

    Chosen per dialect at run time (by the backend) so that no other dialect module is
    imported on start-up.
    """

    impl = REAL
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """The backend's 8-byte float type."""
        from hermes_store.db.backends import backend_for

        return backend_for(dialect).float8_type(dialect)


class EpochSeconds(Float8):
    """Seconds since the Unix epoch (``started_at``, ``ended_at``, ``timestamp``)."""

    cache_ok = True


class Money(Float8):
    """An amount in US dollars (``estimated_cost_usd``, ``actual_cost_usd``)."""

    cache_ok = True
