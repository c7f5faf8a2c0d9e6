"""One object per database backend holding everything that differs between them.

Code outside this package never asks which dialect it runs on: it asks the backend of
its engine, connection or session (:func:`backend_for`) to do the dialect-specific part.
A backend module is imported only when a store of that kind is opened, so SQLite users
never import the PostgreSQL dialect. The engine factory (:mod:`hermes_store.db.engine`) is
the only other place that looks at the URL's backend name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from sqlalchemy import ColumnElement, orm
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.types import TypeEngine

_MODULES = {"sqlite": "hermes_store.db.backends.sqlite", "postgresql": "hermes_store.db.backends.postgresql"}
_loaded: dict[str, Backend] = {}


class Backend(Protocol):
    """What hermes_store needs to know about a database backend."""

    name: str
    """SQLAlchemy's name of the dialect (``sqlite``, ``postgresql``)."""
    is_file: bool
    """The store is a local file (SQLite): file paths, WAL, VACUUM of a file, backups."""
    content_sentinel: str
    """How message content's JSON sentinel is stored on this backend."""
    listing_source_column: str
    """The SQL expression for ``s.source`` in listing filters (planner hints differ)."""
    keeps_idle_connections: bool
    """Whether read connections are kept between reads instead of returned to the pool."""
    adopts_legacy_files: bool
    """Whether upstream Hermes' unversioned files can exist on this backend."""
    groups_commits: bool
    """Whether concurrent writers of one process share a commit (``uow/group_commit.py``):
    where each commit is an fsync and the writers queue for one connection anyway."""
    driver_write_begin: str | None
    """The statement that begins a write transaction at the driver, which the unit of work
    then ends with ``COMMIT`` (:func:`hermes_store.db.driver_transaction.begin_driver_transaction`),
    or ``None``: writes run in SQLAlchemy's transactions."""


    def insert(self, table: Any) -> Any:
        """A dialect ``insert(table)`` with ``on_conflict_do_nothing``/``_do_update``."""

    def ascii_case_like(self, column: Any, pattern: str) -> ColumnElement[bool]:
        """``column LIKE pattern`` ignoring ASCII case, as SQLite's LIKE does."""

    def preview_starts_with_sentinel(self) -> tuple[str, dict[str, Any]]:
        """SQL testing whether ``m.content`` starts with the stored sentinel, and its params."""

    def table_count_sql(self, name: str) -> str:
        """A scalar subquery: 1 when the store's schema holds the table ``name`` (a plain
        identifier), else 0. Never fails on a missing table."""

    def in_list(self, expression: str, param: str) -> str:
        """SQL testing ``expression`` against the list bound (by :meth:`list_value`) to
        ``:param``: one parameter whatever the list's length, so the statement stays the
        same text and runs on the lean execution path."""

    def list_value(self, values: Sequence[Any]) -> Any:
        """The value to bind for a list tested with :meth:`in_list`."""

    def content_bind_processor(self) -> Any:
        """A function mapping message content to its stored form, or ``None``."""

    def content_result_processor(self) -> Any:
        """A function mapping stored message content back, or ``None``."""

    def float8_type(self, dialect: Dialect) -> TypeEngine[Any]:
        """The column type of 8-byte floats (timestamps, costs)."""

    def prepare_read_connection(self, connection: Connection) -> Connection:
        """Set up a new connection used for reads; returns it."""

    def begin_snapshot(self, connection: Connection) -> None:
        """Make the transaction just begun on a read connection one consistent snapshot."""

    def checkpoint(self, connection: Connection) -> None:
        """Best-effort log checkpoint after a run of writes (may do nothing), on
        ``connection`` outside any transaction."""

    def take_write_connection(self, connection: Connection) -> Any:
        """Set up the connection a unit of work keeps for its writes, whose log the unit
        of work checkpoints itself (:meth:`checkpoint`); returns what
        :meth:`give_back_write_connection` needs to undo it."""

    def give_back_write_connection(self, connection: Connection, taken: Any) -> None:
        """Undo :meth:`take_write_connection` before the connection returns to its pool."""

    def vacuum(self, engine: Engine) -> None:
        """Reclaim space and refresh statistics, outside any transaction."""

    def storage_facts(self, scalar: Callable[[str], Any], *, schema: str | None = None) -> dict[str, Any]:
        """Facts about the storage for ``hermes-store info``; ``scalar(sql)`` runs a query;
        ``schema``: the profile's schema the store is in, if any."""

    def after_bulk_copy(self, db: orm.Session) -> None:
        """Repair what a bulk copy with explicit ids leaves behind (sequences)."""


def backend_named(name: str) -> Backend:
    """The backend for SQLAlchemy dialect name ``name``; ``ValueError`` if unsupported."""
    backend = _loaded.get(name)
    if backend is None:
        module = _MODULES.get(name)
        if module is None:
            raise ValueError(f"hermes_store does not support the {name!r} database backend")
        backend = _loaded[name] = importlib.import_module(module).BACKEND
    return backend


def backend_for(bind: Engine | Connection | orm.Session | Dialect) -> Backend:
    """The backend of an engine, connection, ORM session or dialect."""
    if isinstance(bind, orm.Session):
        bind = bind.get_bind()
    dialect = bind if isinstance(bind, Dialect) else bind.dialect
    return backend_named(dialect.name)
