"""The one place hermes_store executes SQL.

Every statement — ORM-built, Core-built or hand-written text — runs through SQLAlchemy's
Core :class:`~sqlalchemy.engine.Connection`, never on a driver cursor, so that whatever
listens to the engine sees all of it: ``echo=True``, ``before_cursor_execute`` /
``after_cursor_execute`` listeners (query counters, OpenTelemetry) and ``handle_error``.
Errors therefore arrive in one family, SQLAlchemy's ``DBAPIError`` subclasses, whichever
method meets them; the unit of work translates the ones that mean something
(:mod:`hermes_store.errors_map`) once.

Hand-written SQL uses named ``:param`` placeholders. A list or tuple value binds as an
expanding ``IN`` parameter, and columns named in ``content_keys`` are typed as message
content so that the column type's result processor maps them back from the backend's
storage form. The statement for a given SQL text is built once: its first run learns the
result columns, later runs reuse a textual ``SELECT`` with those columns declared, so
SQLAlchemy caches its result metadata instead of rebuilding it from the cursor each time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Executable, bindparam, column, orm, text
from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.sql.elements import TextClause

from hermes_store.types import MessageContent

Bind = orm.Session | Connection
_CONTENT = MessageContent()
_CACHE_LIMIT = 512
_Key = tuple[str, frozenset[str], tuple[str, ...]]
# SQL text → its statement with declared result columns (filled after the first run).
_prepared: dict[_Key, Executable] = {}


def connection_of(db: Bind) -> Connection:
    """The Core connection (inside the session's transaction) that ``db`` runs on."""
    return db.connection() if isinstance(db, orm.Session) else db


def run(
    db: Bind, statement: Executable, params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None
) -> CursorResult[*tuple[Any, ...]]:
    """Execute a Core/ORM-built statement on ``db``'s connection; returns the cursor result.

    A sequence of mappings as ``params`` runs the statement once per mapping
    (``executemany``).
    """
    return connection_of(db).execute(statement, params)


def _first_statement(sql: str, expanding: frozenset[str]) -> TextClause:
    statement = text(sql)
    if expanding:
        statement = statement.bindparams(*(bindparam(name, expanding=True) for name in sorted(expanding)))
    return statement


def _execute_text(
    db: Bind, sql: str, params: Mapping[str, Any] | None, content: tuple[str, ...]
) -> CursorResult[Any]:
    values = dict(params or {})
    expanding = frozenset(name for name, value in values.items() if isinstance(value, list | tuple))
    key = (sql, expanding, content)
    connection = connection_of(db)
    statement = _prepared.get(key)
    if statement is not None:
        return connection.execute(statement, values)
    first = _first_statement(sql, expanding)
    typed = first.columns(**{name: _CONTENT for name in content}) if content else first
    result = connection.execute(typed, values)
    if result.returns_rows:
        # Positional columns: SQLAlchemy then caches the result metadata with the
        # compiled statement instead of merging it with the cursor description per run.
        declared = [column(name, _CONTENT) if name in content else column(name) for name in result.keys()]  # noqa: SIM118
        if len(_prepared) >= _CACHE_LIMIT:
            _prepared.clear()  # a bounded cache; dynamic SQL (search filters) varies a little
        _prepared[key] = first.columns(*declared)
    return result


def fetch_dicts(
    db: Bind,
    sql: str,
    params: Mapping[str, Any] | None = None,
    content_keys: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """Rows of ``sql`` as dicts. List values in ``params`` expand for ``IN :name``.

    ``content_keys`` name columns holding message content, mapped back from the
    backend's storage form by :class:`hermes_store.types.MessageContent`.
    """
    result = _execute_text(db, sql, params, tuple(content_keys))
    names = list(result.keys())
    return [dict(zip(names, row, strict=True)) for row in result.fetchall()]


def fetch_tuples(
    db: Bind, sql: str, params: Mapping[str, Any] | None = None, content_keys: Iterable[str] = ()
) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` as tuples, same binding and content rules as :func:`fetch_dicts`."""
    result = _execute_text(db, sql, params, tuple(content_keys))
    return [tuple(row) for row in result.fetchall()]


def scalar_text(db: Bind, statement: Executable) -> str | None:
    """The first column of the first row of ``statement`` (a text column), or ``None``."""
    value = run(db, statement).scalar()
    return None if value is None else str(value)
