"""The writing side of ``hermes-store copy``: what the target holds, and how rows get in.

Two writers, one interface (:class:`TargetWriter`):

* :class:`PostgresCopyWriter` streams rows with ``COPY … FROM STDIN`` (psycopg 3), one
  ``COPY`` and one committed transaction per batch. Before the first row it drops the
  secondary indexes and foreign keys of ``sessions`` and ``messages``; after the last row
  it creates every index, constraint and trigger a fresh store has and the target lacks
  (:mod:`hermes_store.admin.copy_schema`) — what is rebuilt never depends on what the
  catalog still held, so a copy interrupted at any point, resumed or restarted, ends
  with the complete schema. Loading a million rows into a table without its GIN indexes
  and then building them once is many times faster than updating them row by row, and
  checking each foreign key once with one join beats a lookup per row. Primary keys and
  unique indexes stay: they keep the load exact.
* :class:`InsertWriter` (SQLite targets) inserts batches through the unit of work; the
  store's triggers fill the FTS5 indexes as rows arrive.

The bookkeeping table ``hermes_copy_state`` (key/value) exists in the target only while a
copy is unfinished: it holds the source's fingerprint, so ``--resume`` can tell the
source has not changed, and the source's URL, so that opening the target as a store is
refused naming the command that finishes the copy. It is dropped once the copy has been
verified.

A restart empties the target before it is brought to head: the writer drops the store's
tables, so the schema is then created again as in an empty database, and whatever an
operator dropped or deleted by hand comes back, the rows the schema's creation writes
included. Every copy also writes back the ``state_meta`` rows a fresh store holds by
itself that the target lacks (:meth:`TargetWriter.restore_seed_meta`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from sqlalchemy import Column, MetaData, Table, Text, delete, func, insert, orm, select, text
from sqlalchemy.engine import Connection, Engine

from hermes_store.admin.copy_schema import (
    SchemaObject,
    StoreSchema,
    drop_statement,
    missing_objects,
    read_schema,
    reference_schema,
)
from hermes_store.admin.copy_source import columns_of
from hermes_store.db.backends import backend_for
from hermes_store.db.copy_stream import copy_rows
from hermes_store.db.execution import run
from hermes_store.db.profiles import store_schema, table_names
from hermes_store.db.transaction_pooler import is_pooled
from hermes_store.domain.progress import ProgressFn
from hermes_store.errors import CopyMismatch, CopyRefused
from hermes_store.repository import telegram_topics
from hermes_store.schema.migrate import COPY_STATE_TABLE
from hermes_store.schema.migration_ops import PROGRESS_TABLE
from hermes_store.schema.models import (
    Base,
    Message,
    Session,
    StateMeta,
)
from hermes_store.schema.telegram_topic_ddl import TOPIC_TABLES
from hermes_store.uow.unit_of_work import UnitOfWork

log = logging.getLogger(__name__)

STATE_TABLE = Table(
    COPY_STATE_TABLE,
    MetaData(),
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
)
"""The copy's bookkeeping in the target (not part of the store's schema)."""

FINGERPRINT_KEY = "source fingerprint"
SOURCE_KEY = "source"
"""The source's URL (password hidden), for the command that finishes the copy."""
_COPY_LOCK_KEY = 8675309019
"""Session-level advisory lock held by the one copy writing into a PostgreSQL target."""
LOCK_WAIT_S = 15.0
"""How long a copy waits for another copy's lock: a killed copy's server process may
outlive its client for a few seconds, until the server notices the closed socket."""
INDEX_BUILD_MEMORY = "256MB"
"""``maintenance_work_mem`` of the copy's own connection while it builds indexes
(PostgreSQL's default, 64 MB, makes a GIN build over a million rows spill to disk)."""
DEFERRED_TABLES = ("sessions", "messages")
"""The bulk-loaded tables whose secondary indexes and foreign keys wait for the load."""
INDEX_BUILDERS = 2
"""Indexes built at once, each by its own server process (a 2-core server: 2)."""
LONGEST_BUILDS = (
    "idx_messages_word_pairs_bucket",
    "idx_messages_trgm",
    "idx_messages_search_vector_bucket",
    "idx_messages_cjk_grams_bucket",
)
"""The index builds that take longest, longest first (per message, on the benchmark's
data: ``docs/postgresql.md``, "Storage per message"). They start first, so the builders
end close together: started last, the longest would run alone on one core at the end."""
STORE_TABLES = tuple(sorted(Base.metadata.tables))
"""The tables of the store's models: a target lacking one of them cannot take a copy."""
DROPPED_ON_RESTART = (*STORE_TABLES, "alembic_version", PROGRESS_TABLE, COPY_STATE_TABLE)
"""What a PostgreSQL restart drops: every table the store's schema creates (and the
copy's bookkeeping), so that the schema is created again from nothing."""


@dataclass(frozen=True)
class TargetState:
    """What the target holds before a copy starts."""

    sessions: int
    messages: int
    fingerprint: dict[str, Any] | None
    """The source fingerprint of an interrupted copy, ``None`` when there is none."""
    unfinished: bool = False
    """The bookkeeping table is there (an interrupted or unverified copy)."""
    missing_tables: tuple[str, ...] = ()
    """Tables of the store the target lacks although it holds a schema (dropped by hand)."""


def inspect_target(engine: Engine) -> TargetState:
    """How many sessions and messages the target holds, and any interrupted copy's record."""
    tables = table_names(engine)
    with orm.Session(engine) as db:

        def count(model: type[Base]) -> int:
            if model.__tablename__ not in tables:
                return 0
            return int(run(db, select(func.count()).select_from(model)).scalar_one())

        fingerprint = None
        unfinished = STATE_TABLE.name in tables
        if unfinished:
            value = run(db, select(STATE_TABLE.c.value).where(STATE_TABLE.c.key == FINGERPRINT_KEY)).scalar()
            fingerprint = None if value is None else json.loads(value)
        has_schema = bool(tables & {*STORE_TABLES, "alembic_version"})
        # A SQLite store creates the Telegram topic tables on first use.
        optional = set(TOPIC_TABLES) if backend_for(engine).is_file else set()
        expected = [name for name in STORE_TABLES if name not in optional]
        missing = tuple(name for name in expected if name not in tables) if has_schema else ()
        return TargetState(count(Session), count(Message), fingerprint, unfinished, missing)


def lacks_what_a_load_sets_aside(engine: Engine) -> bool:
    """Whether a PostgreSQL target lacks an index or foreign key that a copy sets aside
    until its load ends (:func:`deferred_objects`): a store at head never does, a copy
    interrupted mid-load does, even once its bookkeeping is gone."""
    if backend_for(engine).is_file:
        return False  # a SQLite load sets nothing aside
    try:
        reference = reference_schema(engine)
    except CopyMismatch:
        return False  # not at this release's head: not a copy this release made
    found = read_schema(engine)
    return any((item.kind, item.name) not in found.objects for item in deferred_objects(reference))


def target_session_ids(engine: Engine) -> set[str]:
    """The ids of the sessions the target already holds."""
    with orm.Session(engine) as db:
        return {str(value) for value in run(db, select(Session.id)).scalars()}


def target_max_message_id(engine: Engine) -> int | None:
    """The largest message id in the target (``None`` when it holds no message)."""
    with orm.Session(engine) as db:
        value = run(db, select(func.max(Message.id))).scalar()
        return None if value is None else int(value)


def build_order(indexes: Sequence[SchemaObject]) -> list[SchemaObject]:
    """``indexes`` in the order they are built: :data:`LONGEST_BUILDS` first, then the
    others in the order given."""
    rank = {name: place for place, name in enumerate(LONGEST_BUILDS)}
    return sorted(indexes, key=lambda item: rank.get(item.name, len(rank)))


def deferred_objects(reference: StoreSchema) -> list[SchemaObject]:
    """What a PostgreSQL load sets aside: the non-unique indexes and the foreign keys of
    :data:`DEFERRED_TABLES`, as a fresh store defines them."""
    return [
        item
        for item in reference.ordered()
        if item.table in DEFERRED_TABLES
        and (
            (item.kind == "index" and not item.unique)
            or (item.kind == "constraint" and item.definition.startswith("FOREIGN KEY"))
        )
    ]


class TargetWriter(Protocol):
    """Writes a copy into one target; used as a context manager (closes its connection)."""

    def __enter__(self) -> TargetWriter: ...

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None: ...

    def start(self, fingerprint: dict[str, Any], source: str, reference: StoreSchema) -> None:
        """Record the copy (the source's fingerprint and URL) in the target and set aside
        what waits for the load; create beforehand whatever else of ``reference`` the
        target lacks (its triggers must see the rows arrive)."""

    def empty(self) -> None:
        """Empty the target of a restart, before it is brought to head."""

    def restore_seed_meta(self, seeds: dict[str, str | None]) -> None:
        """Write back each ``state_meta`` row a fresh store holds by itself that the target
        lacks (deleted by hand or by a restart); keys it holds are left as they are."""

    def write(self, model: type[Base], rows: Sequence[Sequence[Any]]) -> None:
        """Write one batch of rows (model column order, Python values) and commit it."""

    def replace(self, model: type[Base], rows: Iterable[Sequence[Any]]) -> int:
        """Replace the whole table with ``rows`` in one transaction; how many rows."""

    def upsert_meta(self, rows: Sequence[Sequence[Any]]) -> None:
        """Write every ``state_meta`` row, replacing a key the target holds already."""

    def finish_schema(self, reference: StoreSchema, progress: ProgressFn) -> None:
        """Create every object of ``reference`` the target lacks, reporting step
        ``indexes``."""

    def complete(self) -> None:
        """After the last row: move sequences past the copied ids, refresh statistics."""

    def forget(self) -> None:
        """Drop the copy's bookkeeping (once the copy has been verified)."""

    @property
    def builds_beside_reads(self) -> bool:
        """Whether :meth:`finish_schema` and :meth:`complete` may run while another
        connection reads every row of the target (the copy's verification)."""


def writer_for(engine: Engine) -> TargetWriter:
    """COPY for a PostgreSQL target, batched inserts for anything else."""
    if engine.dialect.name == "postgresql":
        return PostgresCopyWriter(engine)
    return InsertWriter(engine)


def _record_start(db: orm.Session | Connection, fingerprint: dict[str, Any], source: str) -> None:
    STATE_TABLE.create(db.connection() if isinstance(db, orm.Session) else db, checkfirst=True)
    run(db, delete(STATE_TABLE))
    run(
        db,
        insert(STATE_TABLE),
        [
            {"key": FINGERPRINT_KEY, "value": json.dumps(fingerprint, sort_keys=True)},
            {"key": SOURCE_KEY, "value": source},
        ],
    )


def _insert_missing_meta(db: orm.Session | Connection, seeds: dict[str, str | None]) -> None:
    if not seeds:
        return  # an executemany of nothing would be a one-row INSERT … DEFAULT VALUES
    statement = backend_for(db).insert(StateMeta.__table__).on_conflict_do_nothing(index_elements=["key"])
    run(db, statement, [{"key": key, "value": value} for key, value in sorted(seeds.items())])


def _meta_upsert(db: orm.Session | Connection, rows: Sequence[Sequence[Any]]) -> None:
    if not rows:
        return  # an executemany of nothing would be a one-row INSERT … DEFAULT VALUES
    statement = backend_for(db).insert(StateMeta.__table__)
    statement = statement.on_conflict_do_update(
        index_elements=["key"], set_={"value": statement.excluded["value"]}
    )
    run(db, statement, [{"key": key, "value": value} for key, value in rows])


_SQLITE_TABLES = text(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
    "ORDER BY sql NOT LIKE 'CREATE VIRTUAL TABLE%'"
)
"""The file's tables, the search tables first (dropping one drops its shadow tables)."""


def _drop_sqlite_tables(db: orm.Session) -> None:
    # The foreign keys are checked at commit, when no table is left to break them.
    run(db, text("PRAGMA defer_foreign_keys = ON"))
    for name in [str(name) for (name,) in run(db, _SQLITE_TABLES)]:
        run(db, text(f'DROP TABLE IF EXISTS "{name}"'))


def _insert(db: orm.Session | Connection, model: type[Base], rows: Sequence[Sequence[Any]]) -> None:
    if not rows:
        return
    names = columns_of(model)
    table: Table = model.__table__  # type: ignore[assignment]
    run(db, insert(table), [dict(zip(names, row, strict=True)) for row in rows])


def _chunks(rows: Iterable[Sequence[Any]], size: int = 5_000) -> Iterable[list[Sequence[Any]]]:
    chunk: list[Sequence[Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


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

    def start(self, fingerprint: dict[str, Any], source: str, reference: StoreSchema) -> None:
        """Record the copy; create what the target lacks first (nothing is set aside)."""
        self.finish_schema(reference, lambda *_: None)
        self.uow.write(lambda db: _record_start(db, fingerprint, source), "recording the copy")

    def empty(self) -> None:
        """Drop every table of the file in one transaction."""
        self.uow.write(_drop_sqlite_tables, "emptying the target")

    def restore_seed_meta(self, seeds: dict[str, str | None]) -> None:
        """Insert the missing seed rows."""
        self.uow.write(lambda db: _insert_missing_meta(db, seeds), "restoring the store's own metadata")

    def write(self, model: type[Base], rows: Sequence[Sequence[Any]]) -> None:
        """One ``executemany`` insert of the batch, committed."""
        self.uow.write(lambda db: _insert(db, model, rows), f"copying {model.__tablename__}")

    def replace(self, model: type[Base], rows: Iterable[Sequence[Any]]) -> int:
        """Delete the table's rows and insert ``rows``, in one transaction."""
        every = [tuple(row) for row in rows]  # a retried transaction must see them again

        def work(db: orm.Session) -> None:
            if model.__tablename__ in TOPIC_TABLES:
                telegram_topics.create_tables(db)  # a SQLite store makes them on first use
            run(db, delete(model))
            for chunk in _chunks(every):
                _insert(db, model, chunk)

        self.uow.write(work, f"copying {model.__tablename__}")
        return len(every)

    def upsert_meta(self, rows: Sequence[Sequence[Any]]) -> None:
        """Insert or replace every metadata row."""
        self.uow.write(lambda db: _meta_upsert(db, rows), "copying metadata")

    def finish_schema(self, reference: StoreSchema, progress: ProgressFn) -> None:
        """Create the indexes, triggers and search tables the target lacks, in one
        transaction (a SQLite foreign key cannot be added to an existing table: a missing
        one is left for the verification to report)."""
        statements = [
            item.create
            for item in missing_objects(reference, read_schema(self.engine))
            if item.create is not None
        ]
        progress("indexes", 0, len(statements))
        if statements:

            def work(db: orm.Session) -> None:
                for statement in statements:
                    db.connection().exec_driver_sql(statement)

            self.uow.write(work, "creating missing indexes")
        progress("indexes", len(statements), len(statements))

    def complete(self) -> None:
        """The backend's repair after explicit ids (nothing on SQLite: AUTOINCREMENT follows)."""
        self.uow.write(backend_for(self.engine).after_bulk_copy, "resetting the message id sequence")

    def forget(self) -> None:
        """Drop the bookkeeping table."""
        self.uow.write(lambda db: STATE_TABLE.drop(db.connection(), checkfirst=True), "finishing the copy")

    builds_beside_reads = False
    """SQLite: one writer, and a file without WAL blocks its readers while it writes."""


_COLUMN_TYPES = """
    SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
    WHERE a.attrelid = CAST(:table AS regclass) AND a.attnum > 0 AND NOT a.attisdropped
"""


class PostgresCopyWriter:
    """``COPY … FROM STDIN`` in committed batches on one connection (PostgreSQL targets)."""

    binary = False
    """Text COPY: measured as fast as binary here (docs/benchmarks.md) and it takes the
    values SQLite's loose typing may hold (a number stored as text) as INSERT would."""
    builds_beside_reads = True
    """``CREATE INDEX``, ``ADD CONSTRAINT`` and ``ANALYZE`` take locks that let readers read."""

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
        if is_pooled(self.connection):
            # The lock, the COPY streams and the set-aside indexes live in one server session.
            self.connection.close()
            raise CopyRefused(
                "a copy into PostgreSQL needs a direct connection to the server, not one through a "
                "transaction pooler; give the target as the server's own URL"
            )
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

    def start(self, fingerprint: dict[str, Any], source: str, reference: StoreSchema) -> None:
        """Create what the target lacks except what waits for the load; then, in one
        transaction, record the copy and drop the deferred indexes and foreign keys."""
        deferred = deferred_objects(reference)
        names = {(item.kind, item.name) for item in deferred}
        missing = [
            item
            for item in missing_objects(reference, read_schema(self.engine))
            if (item.kind, item.name) not in names
        ]
        self._create(missing, lambda *_: None)
        with self.connection.begin():
            _record_start(self.connection, fingerprint, source)
            for item in deferred:
                self.connection.exec_driver_sql(drop_statement(item, self._quote, store_schema(self.engine)))

    def empty(self) -> None:
        """Drop the store's tables in one transaction (the functions and extensions the
        schema created stay: their creation replaces them)."""
        # Named in the profile's schema, if any: a table it lacks must not be found in public.
        schema = store_schema(self.engine)
        where = f"{self._quote(schema)}." if schema else ""
        tables = ", ".join(where + self._quote(name) for name in DROPPED_ON_RESTART)
        with self.connection.begin():
            self.connection.exec_driver_sql(f"DROP TABLE IF EXISTS {tables} CASCADE")

    def restore_seed_meta(self, seeds: dict[str, str | None]) -> None:
        """Insert the missing seed rows."""
        with self.connection.begin():
            _insert_missing_meta(self.connection, seeds)

    def _statement(self, model: type[Base]) -> tuple[str, list[str]]:
        """The model's ``COPY`` statement, and its column types when :attr:`binary`."""
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

    def _storable(self, model: type[Base], rows: Iterable[Sequence[Any]]) -> Iterable[Sequence[Any]]:
        if model is not Message or self._content is None:
            return rows
        position = columns_of(Message).index("content")
        to_storage = self._content
        return ((*row[:position], to_storage(row[position]), *row[position + 1 :]) for row in rows)

    def write(self, model: type[Base], rows: Sequence[Sequence[Any]]) -> None:
        """One ``COPY`` of the batch in its own transaction."""
        statement, types = self._statement(model)
        with self.connection.begin():
            copy_rows(self.connection, statement, self._storable(model, rows), types=types)

    def replace(self, model: type[Base], rows: Iterable[Sequence[Any]]) -> int:
        """Delete the table's rows and ``COPY`` ``rows`` in, in one transaction."""
        statement, types = self._statement(model)
        with self.connection.begin():
            run(self.connection, delete(model))
            return copy_rows(self.connection, statement, self._storable(model, rows), types=types)

    def upsert_meta(self, rows: Sequence[Sequence[Any]]) -> None:
        """Insert or replace every metadata row (a handful: no COPY needed)."""
        with self.connection.begin():
            _meta_upsert(self.connection, rows)

    def finish_schema(self, reference: StoreSchema, progress: ProgressFn) -> None:
        """Create every object of ``reference`` the target lacks."""
        self._create(missing_objects(reference, read_schema(self.engine)), progress)

    def _create(self, objects: Sequence[SchemaObject], progress: ProgressFn) -> None:
        """Build the indexes :data:`INDEX_BUILDERS` at a time (PostgreSQL builds one GIN
        index on one core), longest first (:func:`build_order`), then the constraints
        (foreign keys find their rows through the rebuilt indexes), then the triggers.
        Each on its own connection, in its own transaction."""
        indexes = build_order([item for item in objects if item.kind == "index"])
        others = [item for item in objects if item.kind != "index"]
        done = 0
        progress("indexes", done, len(objects))
        with ThreadPoolExecutor(max_workers=INDEX_BUILDERS, thread_name_prefix="hermes-copy-index") as pool:
            for future in as_completed([pool.submit(self._create_one, item) for item in indexes]):
                future.result()
                done += 1
                progress("indexes", done, len(objects))
        for item in others:
            self._create_one(item)
            done += 1
            progress("indexes", done, len(objects))

    def _create_one(self, item: SchemaObject) -> None:
        """One object, without the service's statement timeout."""
        if item.create is None:
            return
        started = time.perf_counter()
        with self.engine.connect() as connection, connection.begin():
            connection.exec_driver_sql("SET LOCAL statement_timeout = 0")
            connection.exec_driver_sql(f"SET LOCAL maintenance_work_mem = '{INDEX_BUILD_MEMORY}'")
            connection.exec_driver_sql(item.create)
        log.info("created %s in %.1f s", item.describe(), time.perf_counter() - started)

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
