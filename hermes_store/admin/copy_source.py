"""Reading a store's tables as they are, at whatever revision the store is at.

A copy's source is opened read-only and never migrated. A store behind this release's
head lacks some columns (and perhaps whole tables); :class:`TableReader` selects only
the columns the store really has and fills each missing one with the value a migration
would have given it (the column's server default, else ``NULL``), so every row comes out
in the model's column order whatever the store's revision. The same readers serve the
verification, on both sides.

Streams are ordered by primary key in byte order of the text (``COLLATE "C"`` on
PostgreSQL, SQLite's own ``BINARY``), which is also Python's order of ``str`` values: two
streams from two backends can be merged key by key.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sqlalchemy import Select, Table, collate, func, inspect, select
from sqlalchemy.engine import Engine
from sqlalchemy.sql import ColumnElement

from hermes_store.db.execution import run
from hermes_store.db.profiles import store_schema
from hermes_store.errors import CopyRefused
from hermes_store.schema.file_layout import read_layout
from hermes_store.schema.migrate import read_schema_state
from hermes_store.schema.models import (
    Base,
    CompressionLock,
    Message,
    Session,
    StateMeta,
    TelegramTopicBinding,
    TelegramTopicMode,
)
from hermes_store.schema.revisions import history

COPIED_MODELS: tuple[type[Base], ...] = (
    Session,
    Message,
    StateMeta,
    CompressionLock,
    TelegramTopicMode,
    TelegramTopicBinding,
)
"""Every table whose rows a copy carries (``schema_version`` is the target's own)."""
STREAM_ROWS = 2_000
"""Rows fetched per round trip by a streaming read."""
SORT_MEMORY = "256MB"
"""``work_mem`` of a streaming read on PostgreSQL: a verification reads every message in
session order (``COLLATE "C"``, the order of no index), a sort of the whole table that
PostgreSQL's default 4 MB spills into hundreds of runs merged pass after pass."""


def columns_of(model: type[Base]) -> list[str]:
    """The model's column names, in table order (the order rows are read and written in)."""
    return [column.name for column in model.__table__.columns]


_PRESENT = object()
"""Marks a column the store has (its value comes from the row)."""


def _default_of(table: Table, name: str) -> Any:
    """What a migration adding column ``name`` gives existing rows: its server default."""
    default = table.c[name].server_default
    if default is None:
        return None
    spelled = str(getattr(default, "arg", "")).strip()
    if spelled.lstrip("-").isdigit():
        return int(spelled)
    if len(spelled) >= 2 and spelled[0] == spelled[-1] == "'":
        return spelled[1:-1].replace("''", "'")
    return None


@dataclass(frozen=True)
class TableReader:
    """Reads one model table of one store: the columns it has, defaults for the others."""

    model: type[Base]
    present: frozenset[str]
    """The columns the store's table has (empty when the table itself is missing)."""

    @property
    def table(self) -> Table:
        """The model's table."""
        return self.model.__table__  # type: ignore[return-value]

    @property
    def exists(self) -> bool:
        """Whether the store has this table at all."""
        return bool(self.present)

    @cached_property
    def missing(self) -> list[str]:
        """Model columns the store's table lacks."""
        return [name for name in columns_of(self.model) if name not in self.present]

    def columns(self) -> list[ColumnElement[Any]]:
        """The selected columns: the model's, in order, that the store has."""
        return [column for column in self.table.columns if column.name in self.present]

    def complete(self, row: Sequence[Any]) -> tuple[Any, ...]:
        """A selected row as a full model row: defaults where the store has no column."""
        if not self.missing:
            return tuple(row)  # a store at head: the row is whole already
        values = iter(row)
        defaults = self._defaults
        return tuple(next(values) if default is _PRESENT else default for default in defaults)

    @cached_property
    def _defaults(self) -> tuple[Any, ...]:
        """Per model column: :data:`_PRESENT`, or the default standing in for it."""
        return tuple(
            _PRESENT if name in self.present else _default_of(self.table, name)
            for name in columns_of(self.model)
        )

    def key_columns(self, engine: Engine) -> list[ColumnElement[Any]]:
        """The primary key, compared as bytes on every backend."""
        keys: list[ColumnElement[Any]] = []
        for column in self.table.primary_key.columns:
            text_key = column.type.python_type is str
            keys.append(collate(column, "C") if text_key and engine.dialect.name == "postgresql" else column)
        return keys


def readers_for(engine: Engine) -> dict[str, TableReader]:
    """A reader per copied table of the store behind ``engine`` (nothing is written)."""
    inspector = inspect(engine)
    schema = store_schema(engine)
    tables = set(inspector.get_table_names(schema=schema))
    readers = {}
    for model in COPIED_MODELS:
        name = model.__tablename__
        columns = inspector.get_columns(name, schema=schema) if name in tables else []
        present = {str(column["name"]) for column in columns}
        readers[name] = TableReader(model, frozenset(present & set(columns_of(model))))
    return readers


def stream_rows(
    engine: Engine,
    reader: TableReader,
    *,
    order_by: Sequence[ColumnElement[Any]] | None = None,
    where: ColumnElement[bool] | None = None,
) -> Iterator[tuple[Any, ...]]:
    """Every row of ``reader``'s table (full model rows), fetched :data:`STREAM_ROWS` at a
    time on a connection of its own (a server-side cursor on PostgreSQL), in primary-key
    order unless ``order_by`` says otherwise. Nothing when the store lacks the table."""
    if not reader.exists:
        return
    statement = select(*reader.columns()).order_by(*(order_by or reader.key_columns(engine)))
    if where is not None:
        statement = statement.where(where)
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            connection.exec_driver_sql(f"SET LOCAL work_mem = '{SORT_MEMORY}'")
        streaming = connection.execution_options(stream_results=True, yield_per=STREAM_ROWS)
        for row in run(streaming, statement):
            yield reader.complete(row)


def check_source(engine: Engine) -> dict[str, TableReader]:
    """The readers of a copy's source, or :class:`CopyRefused` when it cannot be read as
    it is: no store in it, a schema newer than this release, or titles the target's
    unique title index would refuse (a legacy upstream file that was never adopted)."""
    state = read_schema_state(engine)
    if state.newer and state.revision is None and engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            left_out = ", ".join(read_layout(connection).other_tables) or "none"
        raise CopyRefused(
            f"the source was written by a newer Hermes (schema_version {state.legacy_version}), whose tables "
            f"this hermes-store cannot carry (tables it does not know: {left_out}); a whole-file copy keeps "
            "everything: hermes-store --db SOURCE backup TARGET"
        )
    if state.newer:
        raise CopyRefused(
            f"the source is at schema revision {state.revision or state.legacy_version}, newer than this "
            f"hermes-store (head {history().head}); copy it with the release that wrote it"
        )
    readers = readers_for(engine)
    if not (readers["sessions"].exists and readers["messages"].exists):
        raise CopyRefused("the source holds no hermes session store (no sessions and messages tables)")
    title = readers["sessions"].table.c.title
    with engine.connect() as connection:
        duplicate = run(connection, _duplicate_title(title)).scalar()
    if duplicate is not None:
        raise CopyRefused(
            f"the source holds session title {duplicate!r} more than once, which the target's unique "
            "title index refuses; rename the duplicates in the source first"
        )
    return readers


def _duplicate_title(title: ColumnElement[Any]) -> Select[tuple[Any]]:
    """One title that more than one session holds, if any."""
    return select(title).where(title.is_not(None)).group_by(title).having(func.count() > 1).limit(1)
