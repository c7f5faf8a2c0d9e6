"""A drop-in for Hermes Agent's ``hermes_state`` module, backed by hermes_store.

Hermes imports ``SessionDB``, ``AsyncSessionDB``, ``DEFAULT_DB_PATH`` and the functions
below from ``hermes_state``, and its tests patch names on this module
(``hermes_state.SessionDB``, ``hermes_state.DEFAULT_DB_PATH``,
``hermes_state.sqlite3.connect``, ``hermes_state.repair_state_db_schema``…). This module
offers those names with the same meaning, so Hermes runs on this store with no code of
its own: the wheel also ships a top-level ``hermes_state`` module that *is* this module,
so deleting Hermes' own ``hermes_state.py`` is the only step (see the README, "Running
Hermes on this store", and docs/upstream.md for where the drop-in differs).

``DEFAULT_DB_PATH`` is, as upstream, the default path computed at import. Unlike
upstream, ``SessionDB()`` still follows a ``HERMES_HOME`` changed later (profile
switches, test fixtures) — unless someone rebinds ``DEFAULT_DB_PATH`` here (as Hermes'
tests do), which then wins, as it did upstream.

The module-level functions work on plain ``sqlite3`` connections and files (Hermes calls
some of them on its other databases); they live in :mod:`hermes_store.drop_in`.
"""

from __future__ import annotations

# asyncio, sqlite3, sys and time are module attributes on purpose: Hermes' tests patch
# hermes_state.asyncio.to_thread, hermes_state.sqlite3.connect, hermes_state.sys.platform
# and hermes_state.time.time, and the drop-in looks them up when it runs.
import asyncio
import logging
import os
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, NoReturn, TypeVar

from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.schema import CreateTable

from hermes_store.api import session_db as facade
from hermes_store.db.engine import BUSY_TIMEOUT_S, keeps_rollback_journal, parse_url, resolve_url, sqlite_path
from hermes_store.db.memory import names_memory
from hermes_store.db.profiles import PROFILE_OPTION
from hermes_store.domain.paths import default_db_path, hermes_profile
from hermes_store.drop_in import LOGGER_NAME
from hermes_store.drop_in.async_wrapper import AsyncSessionDB
from hermes_store.drop_in.delegates import _collect_delegate_child_ids, _delete_delegate_children
from hermes_store.drop_in.init_errors import (
    _set_last_init_error,
    format_session_db_unavailable,
    get_last_init_error,
)
from hermes_store.drop_in.repair import (
    _db_opens_cleanly,
    _repair_attempted_paths,
    claim_repair_attempt,
    is_malformed_db_error,
    repair_state_db_schema,
)
from hermes_store.drop_in.review_harness import (
    _is_background_review_harness_message,
    _strip_background_review_harness,
)
from hermes_store.drop_in.served_hermes import check_hermes_served, when_unsupported_hermes_accepted
from hermes_store.drop_in.unsupported_calls import is_dunder, lacks_method, translate_argument_errors
from hermes_store.drop_in.wal_fallback import _wal_fallback_warned_paths, apply_wal_with_fallback
from hermes_store.repository import fts_maintenance
from hermes_store.schema.legacy import HEAD_VERSION
from hermes_store.schema.models import Base
from hermes_store.search.sanitize import MAX_FTS5_QUERY_CHARS

__all__ = [
    "DEFAULT_DB_PATH",
    "DEFERRED_INDEX_SQL",
    "MAX_FTS5_QUERY_CHARS",
    "SCHEMA_SQL",
    "SCHEMA_VERSION",
    "AsyncSessionDB",
    "SessionDB",
    "_collect_delegate_child_ids",
    "_db_opens_cleanly",
    "_delete_delegate_children",
    "_is_background_review_harness_message",
    "_repair_attempted_paths",
    "_set_last_init_error",
    "_strip_background_review_harness",
    "_wal_fallback_warned_paths",
    "apply_wal_with_fallback",
    "asyncio",
    "format_session_db_unavailable",
    "get_last_init_error",
    "is_malformed_db_error",
    "repair_state_db_schema",
    "sqlite3",
    "sys",
    "time",
]

logger = logging.getLogger(LOGGER_NAME)
"""The ``"hermes_state"`` logger, which Hermes' log filters and tests listen to."""

T = TypeVar("T")

DEFAULT_DB_PATH: Path = default_db_path()
"""``$HERMES_HOME/state.db`` (``~/.hermes/state.db``) as it was when this module was imported."""

_IMPORTED_DEFAULT = DEFAULT_DB_PATH

SCHEMA_VERSION: int = HEAD_VERSION
"""Upstream's schema version this store keeps (``schema_version`` holds it)."""

_OPT_IN_TABLES = frozenset({"telegram_dm_topic_mode", "telegram_dm_topic_bindings"})
"""Tables upstream creates only when a chat opts in to Telegram topic mode, so not every
store has them; upstream's ``SCHEMA_SQL`` leaves them out too."""

SCHEMA_SQL: str = "\n".join(
    f"{str(CreateTable(table).compile(dialect=sqlite_dialect.dialect())).strip()};"
    for table in Base.metadata.sorted_tables
    if table.name not in _OPT_IN_TABLES
)
"""The DDL (SQLite) of the tables every store has, rendered from ``hermes_store.schema.models``:
each with every column it has."""

DEFERRED_INDEX_SQL: str = """
CREATE INDEX IF NOT EXISTS idx_messages_session_active
    ON messages(session_id, active, timestamp);
CREATE INDEX IF NOT EXISTS idx_sessions_session_key
    ON sessions(session_key, started_at DESC);
CREATE INDEX IF NOT EXISTS idx_sessions_gateway_peer
    ON sessions(source, user_id, chat_id, chat_type, thread_id, started_at DESC);
CREATE INDEX IF NOT EXISTS idx_sessions_handoff_state
    ON sessions(handoff_state, started_at);
"""
"""The indexes on columns later schema versions added, as SQLite DDL (the store's
migrations create them; Hermes code that builds a file by hand runs this after its
columns exist)."""


class SessionDB(facade.SessionDB):
    """``hermes_store.SessionDB`` as Hermes' ``hermes_state.SessionDB``.

    Beyond the store itself: ``read_only`` as the second positional argument; SQLite
    connections made through ``sqlite3.connect`` with :func:`apply_wal_with_fallback`
    (so the rollback journal is used where the file system refuses WAL); a file whose
    schema is malformed is repaired once per process and opened again; a failure to
    open is recorded for :func:`format_session_db_unavailable` and raised as the
    ``sqlite3`` error behind it; the FTS segments are merged every
    ``_OPTIMIZE_EVERY_N_WRITES`` writes.
    """

    _OPTIMIZE_EVERY_N_WRITES: ClassVar[int] = 1000

    def __init__(
        self,
        db_path: str | os.PathLike[str] | None = None,
        read_only: bool = False,
        *,
        url: str | URL | None = None,
        engine: Engine | None = None,
    ) -> None:
        """Open (creating or upgrading, unless ``read_only``) the store at ``db_path``,
        ``url`` or ``engine``.

        With none of them, the store is ``DEFAULT_DB_PATH`` — or, while nobody has
        rebound that name, ``$HERMES_HOME/state.db`` as it is now. ``read_only=True``
        opens an existing store without changing it; its writes raise
        ``sqlite3.OperationalError("attempt to write a readonly database")``.

        Lock contention is handled as upstream v11 handles it: SQLite's busy handler waits
        at most 1 s, then the write is retried after 20-150 ms of random jitter, up to 15
        attempts (``WriteConflict`` after that). Waiting up to 30 s inside SQLite's own
        handler instead would let its fixed sleep schedule line the writers of a busy
        gateway up one behind another (docs/reliability.md).
        """
        if db_path is None and url is None and engine is None:
            db_path = _default_path()
        self._writes_since_merge = 0
        self._merging_fts = False
        try:
            check_hermes_served()
            self._open(db_path, read_only, url, engine)
        except Exception as exc:
            _set_last_init_error(f"{type(exc).__name__}: {exc}")
            raise

    if not TYPE_CHECKING:  # a type checker must still flag a misspelt method

        def __getattr__(self, name: str) -> NoReturn:
            """Only for names the drop-in lacks: a one-line :class:`DropInLacksMethod`."""
            if is_dunder(name):
                message = f"{type(self).__name__!r} object has no attribute {name!r}"
                raise AttributeError(message, name=name, obj=self)
            raise lacks_method("SessionDB", name)

    def _open(
        self,
        db_path: str | os.PathLike[str] | None,
        read_only: bool,
        url: str | URL | None,
        engine: Engine | None,
    ) -> None:
        """Open the store; a malformed file is repaired (once per process) and opened again."""
        path = _state_db_file(db_path) if url is None and engine is None else None
        if url is not None:
            url = _url_of_home_profile(url)
        options: dict[str, Any] = {}
        if path is not None and not read_only:
            options["creator"] = _state_db_connector(path)

        # Bound here: a name lookup of SessionDB at call time would find whatever a caller
        # patched onto this module (Hermes' tests put factories there).
        open_store = super().__init__

        def open_once() -> None:
            open_store(db_path, url=url, engine=engine, read_only=read_only, **options)

        try:
            _raise_as_sqlite_error(open_once)
        except sqlite3.DatabaseError as exc:
            if path is None or read_only or not is_malformed_db_error(exc) or not claim_repair_attempt(path):
                raise
            logger.error("state.db schema is malformed (%s); repairing it (a copy is kept first)", exc)
            repair: Callable[..., dict[str, Any]] = globals()["repair_state_db_schema"]
            if not repair(path).get("repaired"):
                raise
            _raise_as_sqlite_error(open_once)
        if path is not None and not read_only:
            self._restore_fts_index()

    def _restore_fts_index(self) -> None:
        """Recreate FTS tables or triggers that are gone and refill those indexes.

        A repair may drop the whole FTS schema, and a runtime without FTS5 may have dropped
        the triggers to keep writes working; either way search would miss messages. Best
        effort: a failure is logged and the store opens anyway (the next open tries again).
        """
        try:
            missing = self._query(fts_maintenance.missing_fts_objects)
            if not missing:
                return
            left_to_hermes = self._query(lambda db: fts_maintenance.unrepairable(db, missing))
            if left_to_hermes is not None:
                logger.warning("state.db: %s", left_to_hermes)
                return
            refilled = self._write(
                lambda db: fts_maintenance.restore_fts_objects(db, missing), "restoring the full-text index"
            )
        except Exception as exc:  # the store works without it; search stays incomplete until it succeeds
            logger.warning("state.db: could not restore the missing full-text index objects: %s", exc)
            return
        logger.warning("state.db: full-text index objects were missing; rebuilt %s", ", ".join(refilled))

    def _write(self, work: Callable[[Connection], T], operation: str) -> T:
        """One retried write transaction. As upstream's, every write passes through
        :meth:`_execute_write`, so code that wraps that method (Hermes' tests do) sees
        each of them once."""
        return self._execute_write(_StoreWrite(work, operation))

    def _execute_write(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(connection)`` in one retried write transaction (upstream's primitive):
        ``fn`` gets the driver's connection, a store write its SQLAlchemy one. Every
        ``_OPTIMIZE_EVERY_N_WRITES`` writes the FTS segments are merged too (best effort:
        a failed merge never fails the write)."""
        if isinstance(fn, _StoreWrite):
            work, operation = fn.work, fn.operation
        else:
            raw = fn
            work, operation = (lambda db: raw(db.connection.driver_connection)), "a raw write"
        result: T = super()._write(work, operation)
        if not self._merging_fts:
            self._writes_since_merge += 1
            if self._writes_since_merge >= self._OPTIMIZE_EVERY_N_WRITES:
                self._writes_since_merge = 0
                self._merge_fts_segments()
        return result

    def _merge_fts_segments(self) -> None:
        self._merging_fts = True
        try:
            self.optimize_fts()
        except Exception as exc:  # an optimisation: the write it follows has committed
            logger.debug("periodic FTS segment merge skipped: %s", exc)
        finally:
            self._merging_fts = False

    @staticmethod
    def _parse_schema_columns(schema_sql: str) -> dict[str, dict[str, str]]:
        """``{table: {column: declared type}}`` for the tables ``schema_sql`` creates.

        SQLite itself reads the DDL (into a throwaway in-memory database), so any syntax
        it accepts is understood.
        """
        scratch = sqlite3.connect(":memory:")
        try:
            scratch.executescript(schema_sql)
            names = scratch.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
            return {
                name: {str(row[1]): str(row[2]) for row in scratch.execute(f'PRAGMA table_info("{name}")')}
                for (name,) in names
            }
        finally:
            scratch.close()


when_unsupported_hermes_accepted(lambda: translate_argument_errors(SessionDB))


if not TYPE_CHECKING:

    def __getattr__(name: str) -> NoReturn:
        """A name this module lacks (Hermes 0.20's gateway imports ``_default_db_path`` before
        it opens a store): the refusal of an unserved Hermes, else a one-line
        :class:`DropInLacksMethod`."""
        if is_dunder(name):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        check_hermes_served()
        raise lacks_method("hermes_state", name)


class _StoreWrite(Generic[T]):
    """A store write (work for a SQLAlchemy connection, and what it is for errors) on its
    way through :meth:`SessionDB._execute_write`."""

    def __init__(self, work: Callable[[Connection], T], operation: str) -> None:
        self.work = work
        self.operation = operation

    def __call__(self, connection: Connection) -> T:
        return self.work(connection)


def _default_path() -> Path:
    rebound: Any = globals()["DEFAULT_DB_PATH"]
    if rebound is not _IMPORTED_DEFAULT:
        return Path(rebound)
    return default_db_path()


def _url_of_home_profile(url: str | URL) -> str | URL:
    """A PostgreSQL ``url`` in the schema of the Hermes profile ``HERMES_HOME`` is the folder
    of (``…/profiles/<name>``), unless the URL names a profile itself. Under the default
    home (``~/.hermes``) the URL is left as it is: the store keeps the tables it had."""
    parsed = parse_url(url)
    profile = hermes_profile()
    if profile is None or parsed.get_backend_name() != "postgresql" or PROFILE_OPTION in parsed.query:
        return url
    return parsed.update_query_dict({PROFILE_OPTION: profile})


def _state_db_file(db_path: str | os.PathLike[str] | None) -> Path | None:
    """The SQLite file ``db_path`` names, as the store's engine resolves it; ``None`` for a
    server URL, an in-memory database or a SQLite URI filename (which keep the store's own
    connections)."""
    if db_path is None or names_memory(db_path):
        return None
    url = resolve_url(db_path)
    if url.query.get("uri") == "true":
        return None
    return sqlite_path(url)


def _state_db_connector(path: Path) -> Callable[[], sqlite3.Connection]:
    """How the store connects to ``path``: ``sqlite3.connect``, looked up when called (so
    a test's replacement is used), then WAL or, where the file system refuses it, the
    rollback journal; a file that already has a schema keeps the journal mode it has."""

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        try:
            if not keeps_rollback_journal(conn.cursor()):
                apply_wal_with_fallback(conn, db_label="state.db")
        except BaseException:
            conn.close()
            raise
        return conn

    return connect


def _raise_as_sqlite_error(open_store: Callable[[], None]) -> None:
    """Run ``open_store``; an error caused by SQLite is raised as that ``sqlite3`` error
    (what Hermes catches and what upstream raised), the store's own error as its cause."""
    try:
        open_store()
    except Exception as exc:
        cause = _sqlite_cause(exc)
        if cause is None or cause is exc:
            raise
        raise cause from exc


def _sqlite_cause(exc: BaseException) -> sqlite3.Error | None:
    """The first ``sqlite3.Error`` in ``exc``'s chain (``orig``, cause, context), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, sqlite3.Error):
            return current
        seen.add(id(current))
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else (current.__cause__ or current.__context__)
    return None
