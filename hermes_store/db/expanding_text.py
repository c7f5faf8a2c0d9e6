"""Hand-written SQL with ``IN :name`` lists, run through Core: each list binds as
SQLAlchemy's expanding parameter, and a ``SELECT`` is built once per SQL text with its
result columns declared (learned on its first run), so SQLAlchemy caches its result
metadata."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Executable, bindparam, column, text
from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.sql.elements import TextClause

from hermes_store.db.content_decoding import MESSAGE_CONTENT
from hermes_store.db.statement_caches import STATEMENT_CACHE_SIZE, LRUCache

_Key = tuple[str, frozenset[str], tuple[str, ...]]
# SQL text → its statement with declared result columns (filled after the first run).
_prepared: LRUCache[_Key, Executable] = LRUCache(STATEMENT_CACHE_SIZE)


def expanding_names(sql: str, values: Mapping[str, Any]) -> frozenset[str]:
    """The list parameters written ``IN :name``: SQLAlchemy's expanding parameters. A list
    bound anywhere else (e.g. ``= ANY(:name)``) is one value for the driver."""
    return frozenset(
        name
        for name, value in values.items()
        if isinstance(value, list | tuple) and re.search(rf"\bIN\s+:{name}\b", sql, re.IGNORECASE)
    )


def _first_statement(sql: str, expanding: frozenset[str]) -> TextClause:
    statement = text(sql)
    if expanding:
        statement = statement.bindparams(*(bindparam(name, expanding=True) for name in sorted(expanding)))
    return statement


def execute_expanding_text(
    connection: Connection, sql: str, params: Mapping[str, Any] | None, content: tuple[str, ...]
) -> CursorResult[Any]:
    """Run ``sql`` with its list parameters expanded; the columns named in ``content`` are
    typed as message content, so SQLAlchemy decodes them."""
    values = dict(params or {})
    expanding = expanding_names(sql, values)
    key = (sql, expanding, content)
    statement = _prepared.get(key)
    if statement is not None:
        return connection.execute(statement, values)
    first = _first_statement(sql, expanding)
    typed = first.columns(**{name: MESSAGE_CONTENT for name in content}) if content else first
    result = connection.execute(typed, values)
    if result.returns_rows:
        # Positional columns: SQLAlchemy then caches the result metadata with the
        # compiled statement instead of merging it with the cursor description per run.
        names = result.keys()
        declared = [column(name, MESSAGE_CONTENT) if name in content else column(name) for name in names]
        _prepared.put(key, first.columns(*declared))
    return result
