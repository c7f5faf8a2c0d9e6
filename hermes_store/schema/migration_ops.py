"""Idempotent schema operations shared by the Alembic revisions.

Legacy Hermes databases are ragged: a database stamped 7 may lack a version-7 column,
and one stamped 2 may already have version-5 columns (upstream added columns on every
open, whatever the version said). The revisions therefore add only what is missing and
drop only what is there. These helpers hold no DDL of their own: each revision keeps its
frozen DDL text, so history does not change when the package does.

In offline (``--sql``) mode there is no database to inspect; the helpers then emit the
operation unconditionally, which is right for a database the script itself built from
empty (or an online upgrade did): so a revision must not "re-add" offline what an earlier
revision has just created (0001 skips its legacy-gap columns offline). Tests run the
``--sql`` output through ``sqlite3 -bail`` and ``psql -v ON_ERROR_STOP=1``.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa
from alembic import op

from hermes_store.db.backends import backend_for


def dialect_name() -> str:
    """The dialect the migration runs on (online or offline)."""
    return backend_for(op.get_context().dialect).name


def is_offline() -> bool:
    """True when Alembic renders SQL instead of running it."""
    return bool(op.get_context().as_sql)


def table_names() -> set[str]:
    """Names of the tables (and SQLite virtual tables) present now; empty offline."""
    if is_offline():
        return set()
    return set(sa.inspect(op.get_bind()).get_table_names())


def column_names(table: str) -> set[str]:
    """Names of the columns ``table`` has now; empty offline or if the table is missing."""
    if is_offline():
        return set()
    inspector = sa.inspect(op.get_bind())
    if table not in inspector.get_table_names():
        return set()
    return {column["name"] for column in inspector.get_columns(table)}


def index_names(table: str) -> set[str]:
    """Names of the indexes on ``table`` now; empty offline."""
    if is_offline():
        return set()
    inspector = sa.inspect(op.get_bind())
    if table not in inspector.get_table_names():
        return set()
    return {str(index["name"]) for index in inspector.get_indexes(table)}


def add_columns_if_missing(table: str, columns: Iterable[sa.Column[object]]) -> None:
    """Add each column ``table`` lacks; columns already there are left alone."""
    present = column_names(table)
    for column in columns:
        if column.name not in present:
            op.add_column(table, column)


def drop_columns_if_present(table: str, names: Iterable[str]) -> None:
    """Drop each named column that exists, with a native ``ALTER TABLE … DROP COLUMN``.

    Native drops (SQLite ≥ 3.35) keep the table and therefore its triggers; Alembic's
    batch mode would rebuild ``messages`` and silently drop the FTS triggers.
    """
    present = column_names(table)
    for name in names:
        if is_offline() or name in present:
            op.execute(sa.text(f'ALTER TABLE "{table}" DROP COLUMN "{name}"'))


def execute_all(statements: Iterable[str]) -> None:
    """Run raw DDL statements one at a time (``op.execute`` takes one statement)."""
    for statement in statements:
        op.execute(sa.text(statement))
