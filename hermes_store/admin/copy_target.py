"""The writing side of ``hermes-store copy``: what the target holds, and how rows get in.

Two writers, one interface (:class:`TargetWriter`):

* :class:`PostgresCopyWriter` streams rows with ``COPY … FROM STDIN`` (psycopg 3), one
  ``COPY`` and one committed transaction per batch. Before the first row it drops the
  target's secondary indexes and foreign keys — found in the catalog, never by name —
  and records the statement that restores each one in the copy's bookkeeping table, in
  the same transaction; after the last row it runs those statements. Loading a million
  rows into a table without its GIN indexes and then building them once is many times
  faster than updating them row by row, and checking each foreign key once with one join
  beats a lookup per row. Primary keys and unique indexes stay: they keep the load exact.
* :class:`InsertWriter` (SQLite targets) inserts batches through the unit of work; the
  store's triggers fill the FTS5 indexes as rows arrive.

The bookkeeping table ``hermes_copy_state`` (key/value) exists in the target only while a
copy is unfinished: it names the source's fingerprint (so ``--resume`` can tell the source
has not changed) and the indexes and constraints still to restore. It is dropped once the
copy has been verified.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from sqlalchemy import Column, MetaData, Table, Text, delete, func, insert, inspect, orm, select, text
from sqlalchemy.engine import Connection, Engine

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import copy_rows, run
from hermes_store.domain.progress import ProgressFn
from hermes_store.errors import CopyRefused
from hermes_store.schema.models import Base, Message, Session, StateMeta
from hermes_store.uow.unit_of_work import UnitOfWork

log = logging.getLogger(__name__)

STATE_TABLE = Table(
    "hermes_copy_state",
    MetaData(),
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
)
"""The copy's bookkeeping in the target (not part of the store's schema)."""

FINGERPRINT_KEY = "source fingerprint"
_DEFERRED_PREFIX = "restore "
_COPY_LOCK_KEY = 8675309019
"""Session-level advisory lock held by the one copy writing into a PostgreSQL target."""
LOCK_WAIT_S = 15.0
"""How long a copy waits for another copy's lock: a killed copy's server process may
outlive its client for a few seconds, until the server notices the closed socket."""
INDEX_BUILD_MEMORY = "256MB"
"""``maintenance_work_mem`` of the copy's own connection while it builds indexes
(PostgreSQL's default, 64 MB, makes a GIN build over a million rows spill to disk)."""
COPIED_TABLES = ("sessions", "messages")
INDEX_BUILDERS = 2
"""Indexes built at once, each by its own server process (a 2-core server: 2)."""
_INDEX_STEP = "1 index "


@dataclass(frozen=True)
class TargetState:
    """What the target holds before a copy starts."""

    sessions: int
    messages: int
    fingerprint: dict[str, Any] | None
    """The source fingerprint of an interrupted copy, ``None`` when there is none."""


def columns_of(model: type[Base]) -> list[str]:
    """The model's column names, in table order (the order rows are read and written in)."""
    return [column.name for column in model.__table__.columns]


def inspect_target(engine: Engine) -> TargetState:
    """How many sessions and messages the target holds, and any interrupted copy's record."""
    tables = set(inspect(engine).get_table_names())
    with orm.Session(engine) as db:

        def count(model: type[Base]) -> int:
            if model.__tablename__ not in tables:
                return 0
            return int(run(db, select(func.count()).select_from(model)).scalar_one())

        fingerprint = None
        if STATE_TABLE.name in tables:
            value = run(db, select(STATE_TABLE.c.value).where(STATE_TABLE.c.key == FINGERPRINT_KEY)).scalar()
            fingerprint = None if value is None else json.loads(value)
        return TargetState(count(Session), count(Message), fingerprint)


def target_session_ids(engine: Engine) -> set[str]:
    """The ids of the sessions the target already holds."""
    with orm.Session(engine) as db:
        return {str(value) for value in run(db, select(Session.id)).scalars()}


def target_max_message_id(engine: Engine) -> int | None:
    """The largest message id in the target (``None`` when it holds no message)."""
    with orm.Session(engine) as db:
        value = run(db, select(func.max(Message.id))).scalar()
        return None if value is None else int(value)


class TargetWriter(Protocol):
    """Writes a copy into one target; used as a context manager (closes its connection)."""

    def __enter__(self) -> TargetWriter: ...

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None: ...

    def start(self, fingerprint: dict[str, Any]) -> None:
        """Record the copy in the target (and defer what can be rebuilt), atomically."""

    def write(self, model: type[Base], rows: Sequence[Sequence[Any]]) -> None:
        """Write one batch of rows (model column order, Python values) and commit it."""

    def upsert_meta(self, rows: Sequence[Sequence[Any]]) -> None:
        """Write every ``state_meta`` row, replacing a key the target holds already."""

    def pending(self) -> list[tuple[str, str]]:
        """The indexes and constraints still to restore: (name, statement), in order."""

    def restore(self, pending: Sequence[tuple[str, str]], progress: ProgressFn) -> None:
        """Run each restoring statement and strike it off (one transaction each), reporting
        step ``indexes`` as they finish."""

    def complete(self) -> None:
        """After the last row: move sequences past the copied ids, refresh statistics."""

    def forget(self) -> None:
        """Drop the copy's bookkeeping (once the copy has been verified)."""


def writer_for(engine: Engine) -> TargetWriter:
    """COPY for a PostgreSQL target, batched inserts for anything else."""
    if engine.dialect.name == "postgresql":
        return PostgresCopyWriter(engine)
    return InsertWriter(engine)


def _pending(db: orm.Session | Connection) -> list[tuple[str, str]]:
    rows = run(
        db,
        select(STATE_TABLE.c.key, STATE_TABLE.c.value)
        .where(STATE_TABLE.c.key.startswith(_DEFERRED_PREFIX))
        .order_by(STATE_TABLE.c.key),
    )
    return [(str(key)[len(_DEFERRED_PREFIX) :], str(value)) for key, value in rows]


def _record_start(db: orm.Session | Connection, fingerprint: dict[str, Any]) -> None:
    STATE_TABLE.create(db.connection() if isinstance(db, orm.Session) else db, checkfirst=True)
    run(db, delete(STATE_TABLE))
    run(db, insert(STATE_TABLE).values(key=FINGERPRINT_KEY, value=json.dumps(fingerprint, sort_keys=True)))


def _meta_upsert(db: orm.Session | Connection, rows: Sequence[Sequence[Any]]) -> None:
    if not rows:
        return  # an executemany of nothing would be a one-row INSERT … DEFAULT VALUES
    statement = backend_for(db).insert(StateMeta.__table__)
    statement = statement.on_conflict_do_update(
        index_elements=["key"], set_={"value": statement.excluded["value"]}
    )
    run(db, statement, [{"key": key, "value": value} for key, value in rows])


class InsertWriter:
    """Batched ``INSERT``s through the unit of work (SQLite targets)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.uow = UnitOfWork(engine, owns_engine=False)

    def __enter__(self) -> InsertWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.uow.close()

    def start(self, fingerprint: dict[str, Any]) -> None:
        """Record the copy in the target."""
        self.uow.write(lambda db: _record_start(db, fingerprint), "recording the copy")

    def write(self, model: type[Base], rows: Sequence[Sequence[Any]]) -> None:
        """One ``executemany`` insert of the batch, committed."""
        names = columns_of(model)
        values = [dict(zip(names, row, strict=True)) for row in rows]
        table: Table = model.__table__  # type: ignore[assignment]
        self.uow.write(lambda db: run(db, insert(table), values), f"copying {model.__tablename__}")

    def upsert_meta(self, rows: Sequence[Sequence[Any]]) -> None:
        """Insert or replace every metadata row."""
        self.uow.write(lambda db: _meta_upsert(db, rows), "copying metadata")

    def pending(self) -> list[tuple[str, str]]:
        """Nothing is deferred on SQLite."""
        return []

    def restore(self, pending: Sequence[tuple[str, str]], progress: ProgressFn) -> None:
        """Nothing to do: nothing is deferred on SQLite."""

    def complete(self) -> None:
        """The backend's repair after explicit ids (nothing on SQLite: AUTOINCREMENT follows)."""
        self.uow.write(backend_for(self.engine).after_bulk_copy, "resetting the message id sequence")

    def forget(self) -> None:
        """Drop the bookkeeping table."""
        self.uow.write(lambda db: STATE_TABLE.drop(db.connection(), checkfirst=True), "finishing the copy")


_SECONDARY_INDEXES = """
    SELECT c.relname, pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = CAST(:table AS regclass) AND NOT i.indisunique AND NOT i.indisprimary
      AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
    ORDER BY c.relname
"""
_FOREIGN_KEYS = """
    SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
    WHERE conrelid = CAST(:table AS regclass) AND contype = 'f' ORDER BY conname
"""
_COLUMN_TYPES = """
    SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
    WHERE a.attrelid = CAST(:table AS regclass) AND a.attnum > 0 AND NOT a.attisdropped
"""


class PostgresCopyWriter:
    """``COPY … FROM STDIN`` in committed batches on one connection (PostgreSQL targets)."""

    binary = False
    """Text COPY: measured as fast as binary here (docs/benchmarks.md) and it takes the
    values SQLite's loose typing may hold (a number stored as text) as INSERT would."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.connection = engine.connect()
        self._content = backend_for(engine).content_bind_processor()
        self._statements: dict[str, tuple[str, list[str]]] = {}
        self._lock()

    def __enter__(self) -> PostgresCopyWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        # A pooled connection keeps its session-level locks when it goes back to the pool.
        try:
            if self.connection.in_transaction():
                self.connection.rollback()
            with self.connection.begin():
                run(self.connection, text(f"SELECT pg_advisory_unlock({_COPY_LOCK_KEY})"))
        except Exception:
            # A broken connection must not hide the error that ended the copy: drop it
            # from the pool instead, and the server ends the lock with its session.
            self.connection.invalidate()
        finally:
            self.connection.close()

    def _lock(self) -> None:
        """Hold the target's copy lock for the whole copy: one copy writes at a time."""
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            with self.connection.begin():
                taken = run(self.connection, text(f"SELECT pg_try_advisory_lock({_COPY_LOCK_KEY})")).scalar()
            if taken:
                return
            if time.monotonic() > deadline:
                self.connection.close()
                raise CopyRefused(
                    "another hermes-store copy is writing into the target; wait for it to finish "
                    "(or stop it and run this one with --resume)"
                )
            time.sleep(0.2)

    def _quote(self, name: str) -> str:
        return self.engine.dialect.identifier_preparer.quote(name)

    def start(self, fingerprint: dict[str, Any]) -> None:
        """Record the copy, drop secondary indexes and foreign keys, keep how to restore them."""
        with self.connection.begin():
            _record_start(self.connection, fingerprint)
            steps: list[tuple[str, str, str]] = []
            for table in COPIED_TABLES:
                for name, definition in run(self.connection, text(_SECONDARY_INDEXES), {"table": table}):
                    steps.append((f"{_INDEX_STEP}{name}", definition, f"DROP INDEX {self._quote(name)}"))
                for name, definition in run(self.connection, text(_FOREIGN_KEYS), {"table": table}):
                    quoted = f"ALTER TABLE {self._quote(table)}"
                    steps.append(
                        (
                            f"2 constraint {name}",
                            f"{quoted} ADD CONSTRAINT {self._quote(name)} {definition}",
                            f"{quoted} DROP CONSTRAINT {self._quote(name)}",
                        )
                    )
            for key, restore, drop in steps:
                run(self.connection, insert(STATE_TABLE).values(key=_DEFERRED_PREFIX + key, value=restore))
                self.connection.exec_driver_sql(drop)

    def _statement(self, model: type[Base]) -> tuple[str, list[str]]:
        table = model.__tablename__
        if table not in self._statements:
            names = columns_of(model)
            statement = f"COPY {self._quote(table)} ({', '.join(self._quote(n) for n in names)}) FROM STDIN"
            types: list[str] = []
            if self.binary:
                with self.connection.begin():
                    catalog = run(self.connection, text(_COLUMN_TYPES), {"table": table})
                    found = {str(n): str(t) for n, t in catalog}
                types = [found[name] for name in names]
                statement += " (FORMAT BINARY)"
            self._statements[table] = (statement, types)
        return self._statements[table]

    def write(self, model: type[Base], rows: Sequence[Sequence[Any]]) -> None:
        """One ``COPY`` of the batch in its own transaction."""
        statement, types = self._statement(model)
        if model is Message and self._content is not None:
            position = columns_of(Message).index("content")
            to_storage = self._content
            rows = [(*row[:position], to_storage(row[position]), *row[position + 1 :]) for row in rows]
        with self.connection.begin():
            copy_rows(self.connection, statement, rows, types=types)

    def upsert_meta(self, rows: Sequence[Sequence[Any]]) -> None:
        """Insert or replace every metadata row (a handful: no COPY needed)."""
        with self.connection.begin():
            _meta_upsert(self.connection, rows)

    def pending(self) -> list[tuple[str, str]]:
        """The recorded indexes first, then the foreign keys, as the start recorded them."""
        with self.connection.begin():
            return _pending(self.connection)

    def restore(self, pending: Sequence[tuple[str, str]], progress: ProgressFn) -> None:
        """Build the indexes :data:`INDEX_BUILDERS` at a time (PostgreSQL builds one GIN
        index on one core), then add the foreign keys, which find their rows through the
        rebuilt indexes. Each on its own connection and in its own transaction."""
        indexes = [item for item in pending if item[0].startswith(_INDEX_STEP)]
        constraints = [item for item in pending if not item[0].startswith(_INDEX_STEP)]
        done = 0
        progress("indexes", done, len(pending))
        with ThreadPoolExecutor(max_workers=INDEX_BUILDERS, thread_name_prefix="hermes-copy-index") as pool:
            for future in as_completed([pool.submit(self._restore_one, *item) for item in indexes]):
                future.result()
                done += 1
                progress("indexes", done, len(pending))
        for item in constraints:
            self._restore_one(*item)
            done += 1
            progress("indexes", done, len(pending))

    def _restore_one(self, name: str, statement: str) -> None:
        """One index or constraint, without the service's statement timeout."""
        started = time.perf_counter()
        with self.engine.connect() as connection, connection.begin():
            connection.exec_driver_sql("SET LOCAL statement_timeout = 0")
            connection.exec_driver_sql(f"SET LOCAL maintenance_work_mem = '{INDEX_BUILD_MEMORY}'")
            connection.exec_driver_sql(statement)
            run(connection, delete(STATE_TABLE).where(STATE_TABLE.c.key == _DEFERRED_PREFIX + name))
        log.info("restored %s in %.1f s", name, time.perf_counter() - started)

    def complete(self) -> None:
        """Move the message id sequence past the copied ids; fresh planner statistics."""
        with self.connection.begin():
            backend_for(self.engine).after_bulk_copy(orm.Session(bind=self.connection))
            self.connection.exec_driver_sql("SET LOCAL statement_timeout = 0")
            self.connection.exec_driver_sql("ANALYZE sessions, messages")

    def forget(self) -> None:
        """Drop the bookkeeping table."""
        with self.connection.begin():
            STATE_TABLE.drop(self.connection, checkfirst=True)
