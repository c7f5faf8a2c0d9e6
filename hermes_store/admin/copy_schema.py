"""The indexes, constraints and triggers a store must have, and giving a target all of them.

What a store "must have" is what a freshly created store at the same revision has — never
what the target's catalog happens to hold (a copy sets indexes aside while it loads, and a
copy that was interrupted, or whose bookkeeping was removed, must still end complete):

* SQLite: a new store is created at that revision in a temporary file and read back
  (at head that is the shipped snapshot: a few milliseconds);
* PostgreSQL: :mod:`hermes_store.admin.postgresql_head_schema`, the catalog of a fresh
  PostgreSQL store at head, retaken with ``python -m hermes_store.admin.copy_schema URL``
  and compared with a freshly migrated database by the tests.

Objects are compared by kind and name, then by definition (PostgreSQL's own rendering,
``pg_get_indexdef`` and friends, without the schema name; SQLite's ``CREATE`` text with
its spacing normalised). Only the store's own tables are looked at.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.engine import Connection, Engine

from hermes_store.db.engine import create_engine
from hermes_store.db.execution import run
from hermes_store.errors import CopyMismatch
from hermes_store.schema.migrate import read_schema_state, upgrade
from hermes_store.schema.models import Base
from hermes_store.schema.revisions import history

KIND_ORDER = ("table", "index", "constraint", "trigger")
"""Creation order: virtual tables, then indexes (a foreign key needs the referenced
unique index), then constraints, then triggers."""
SEARCH_TABLES = ("messages_fts", "messages_fts_trigram")
"""SQLite's full-text tables: part of the schema a store must have."""


def store_tables() -> tuple[str, ...]:
    """The tables whose indexes, constraints and triggers are compared."""
    return tuple(sorted(Base.metadata.tables))


@dataclass(frozen=True, order=True)
class SchemaObject:
    """One index, constraint, trigger or virtual table of a store."""

    kind: str
    name: str
    table: str
    definition: str
    """What is compared: the backend's rendering, without schema name or extra spaces."""
    create: str | None = field(default=None, compare=False)
    """The statement that adds it to an existing table (``None``: it cannot be added
    afterwards, as a SQLite foreign key or automatic index)."""

    @property
    def unique(self) -> bool:
        """A unique index (kept while loading: it keeps the load exact)."""
        return self.kind == "index" and self.definition.upper().startswith("CREATE UNIQUE")

    def describe(self) -> str:
        """``index idx_x on messages``."""
        return f"{self.kind} {self.name} on {self.table}"


@dataclass(frozen=True)
class StoreSchema:
    """What one store holds: its objects by (kind, name), and the metadata rows a store
    holds from its creation (``state_meta`` seeds)."""

    revision: str | None
    objects: dict[tuple[str, str], SchemaObject]
    seed_meta: dict[str, str | None]

    def ordered(self) -> list[SchemaObject]:
        """Objects in creation order (within constraints, keys before the foreign keys
        that may refer to them)."""
        return sorted(self.objects.values(), key=_creation_order)


def _creation_order(item: SchemaObject) -> tuple[int, bool, str]:
    return KIND_ORDER.index(item.kind), item.definition.startswith("FOREIGN KEY"), item.name


def _spaced(sql: str) -> str:
    """SQLite ``CREATE`` text with spacing normalised (``a (b,c)`` and ``a(b, c)`` agree)."""
    collapsed = " ".join(sql.split())
    return re.sub(r"\s*([(),])\s*", r"\1", collapsed)


def _sqlite_objects(connection: Connection, tables: tuple[str, ...]) -> list[SchemaObject]:
    objects: list[SchemaObject] = []
    rows = run(
        connection,
        text(
            "SELECT type, name, tbl_name, sql FROM sqlite_master "
            "WHERE type IN ('index', 'trigger') AND tbl_name IN :tables "
            "OR type = 'table' AND name IN :search"
        ).bindparams(bindparam("tables", expanding=True), bindparam("search", expanding=True)),
        {"tables": list(tables), "search": list(SEARCH_TABLES)},
    )
    for kind, name, table, sql in rows:
        if sql is None:  # an automatic index (a PRIMARY KEY or UNIQUE column)
            objects.append(SchemaObject("index", str(name), str(table), "automatic"))
        else:
            objects.append(SchemaObject(str(kind), str(name), str(table), _spaced(str(sql)), str(sql)))
    for table in tables:
        pragma = connection.exec_driver_sql(f"PRAGMA foreign_key_list({_sqlite_quote(table)})")
        for row in pragma:
            _, _, referred, column, referred_column, on_update, on_delete, _ = row
            definition = (
                f"FOREIGN KEY ({column}) REFERENCES {referred}({referred_column}) "
                f"ON UPDATE {on_update} ON DELETE {on_delete}"
            )
            objects.append(SchemaObject("constraint", f"foreign key {table}.{column}", table, definition))
    return objects


def _sqlite_quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_PG_INDEXES = """
    SELECT c.relname, t.relname, pg_get_indexdef(i.indexrelid)
    FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid
    JOIN pg_class t ON t.oid = i.indrelid
    WHERE t.relnamespace = CAST(current_schema() AS regnamespace) AND t.relname IN :tables
      AND NOT EXISTS (
        SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.contype IN ('p', 'u', 'x')
      )
"""
_PG_CONSTRAINTS = """
    SELECT k.conname, t.relname, pg_get_constraintdef(k.oid)
    FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid
    WHERE t.relnamespace = CAST(current_schema() AS regnamespace) AND t.relname IN :tables
"""
_PG_TRIGGERS = """
    SELECT g.tgname, t.relname, pg_get_triggerdef(g.oid)
    FROM pg_trigger g JOIN pg_class t ON t.oid = g.tgrelid
    WHERE t.relnamespace = CAST(current_schema() AS regnamespace) AND t.relname IN :tables
      AND NOT g.tgisinternal
"""


def _pg_objects(connection: Connection, tables: tuple[str, ...]) -> list[SchemaObject]:
    schema = str(connection.exec_driver_sql("SELECT current_schema()").scalar_one())
    quote = connection.dialect.identifier_preparer.quote
    qualified = f" ON {quote(schema)}."

    def rows(sql: str) -> list[tuple[str, str, str]]:
        statement = text(sql).bindparams(bindparam("tables", expanding=True))
        return [(str(a), str(b), str(c)) for a, b, c in run(connection, statement, {"tables": list(tables)})]

    objects: list[SchemaObject] = []
    for name, table, definition in rows(_PG_INDEXES):
        local = definition.replace(qualified, " ON ", 1)
        objects.append(SchemaObject("index", name, table, local, local))
    for name, table, definition in rows(_PG_CONSTRAINTS):
        create = f"ALTER TABLE {quote(table)} ADD CONSTRAINT {quote(name)} {definition}"
        objects.append(SchemaObject("constraint", name, table, definition, create))
    for name, table, definition in rows(_PG_TRIGGERS):
        local = definition.replace(qualified, " ON ", 1)
        objects.append(SchemaObject("trigger", name, table, local, local))
    return objects


def read_schema(engine: Engine) -> StoreSchema:
    """The objects the store behind ``engine`` holds now, and its ``state_meta`` rows
    (read only; meant for small, fresh stores when the rows are used as seeds)."""
    tables = store_tables()
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            objects = _pg_objects(connection, tables)
        else:
            objects = _sqlite_objects(connection, tables)
        meta = {
            str(key): value for key, value in connection.exec_driver_sql("SELECT key, value FROM state_meta")
        }
    revision = read_schema_state(engine).revision
    return StoreSchema(revision, {(item.kind, item.name): item for item in objects}, meta)


def reference_schema(engine: Engine) -> StoreSchema:
    """What a fresh store at ``engine``'s revision holds, on ``engine``'s backend.

    Raises :class:`CopyMismatch` for a store newer than this release, and for a
    PostgreSQL store at a revision other than the one the shipped PostgreSQL catalog
    describes (this release's head).
    """
    revision = read_schema_state(engine).revision
    if revision is not None and revision not in history():
        raise CopyMismatch(
            f"the target is at schema revision {revision}, newer than this hermes-store (head "
            f"{history().head}): verify it with the release that wrote it"
        )
    if engine.dialect.name == "postgresql":
        from hermes_store.admin import postgresql_head_schema as shipped

        if revision != shipped.REVISION:
            raise CopyMismatch(
                f"the target is at schema revision {revision}; this hermes-store knows the PostgreSQL "
                f"schema of revision {shipped.REVISION} only: upgrade the target (hermes-store upgrade) first"
            )
        objects = [SchemaObject(*row) for row in shipped.OBJECTS]
        return StoreSchema(
            revision, {(item.kind, item.name): item for item in objects}, dict(shipped.SEED_META)
        )
    with tempfile.TemporaryDirectory(prefix="hermes-store-reference-") as folder:
        fresh = create_engine(Path(folder) / "fresh.db")
        try:
            upgrade(fresh, revision or "head")
            return read_schema(fresh)
        finally:
            fresh.dispose()


def differences(reference: StoreSchema, found: StoreSchema) -> list[str]:
    """How ``found`` differs from ``reference``, one phrase each, in creation order:
    objects missing, objects defined otherwise, then objects a fresh store lacks."""
    phrases: list[str] = []
    for item in reference.ordered():
        present = found.objects.get((item.kind, item.name))
        if present is None:
            phrases.append(f"{item.describe()} is missing from the target")
        elif present.definition != item.definition or present.table != item.table:
            phrases.append(
                f"{item.describe()} differs: a fresh store has {item.definition!r}, "
                f"the target {present.definition!r}"
            )
    phrases.extend(
        f"{item.describe()} is in the target but not in a fresh store"
        for item in found.ordered()
        if (item.kind, item.name) not in reference.objects
    )
    return phrases


def missing_objects(reference: StoreSchema, found: StoreSchema) -> list[SchemaObject]:
    """Reference objects the target lacks, in creation order."""
    return [item for item in reference.ordered() if (item.kind, item.name) not in found.objects]


def drop_statement(item: SchemaObject, quote: Any, schema: str | None = None) -> str:
    """The statement that removes ``item`` if it is there (PostgreSQL), an index named in
    ``schema`` when given: a profile's missing index must not be found in ``public``."""
    if item.kind == "index":
        where = f"{quote(schema)}." if schema else ""
        return f"DROP INDEX IF EXISTS {where}{quote(item.name)}"
    if item.kind == "constraint":
        return f"ALTER TABLE {quote(item.table)} DROP CONSTRAINT IF EXISTS {quote(item.name)}"
    return f"DROP TRIGGER IF EXISTS {quote(item.name)} ON {quote(item.table)}"


def render_module(schema: StoreSchema) -> str:
    """The text of :mod:`hermes_store.admin.postgresql_head_schema` for ``schema``."""
    lines = [
        '"""The catalog of a fresh PostgreSQL store at head: what every PostgreSQL store must hold.',
        "",
        "Generated by ``python -m hermes_store.admin.copy_schema URL`` from a database just",
        "migrated to head; ``tests/postgres/test_pg_copy.py`` checks it against a fresh one.",
        '"""',
        "",
        "# ruff: noqa: E501",
        "",
        f"REVISION = {schema.revision!r}",
        "",
        "OBJECTS: tuple[tuple[str, str, str, str, str | None], ...] = (",
    ]
    for item in schema.ordered():
        lines.append(f"    {(item.kind, item.name, item.table, item.definition, item.create)!r},")
    lines += [")", "", f"SEED_META: dict[str, str | None] = {dict(sorted(schema.seed_meta.items()))!r}", ""]
    return "\n".join(lines)


def _main(argv: Iterable[str]) -> None:
    (url,) = list(argv)
    engine = create_engine(url, prepare=False)
    try:
        sys.stdout.write(render_module(read_schema(engine)))
    finally:
        engine.dispose()


if __name__ == "__main__":  # pragma: no cover - a maintainer's command
    _main(sys.argv[1:])
