"""Hand-written SQL put into the driver's parameter style, once per SQL text and dialect.

Hand-written statements name their parameters ``:name``; SQLAlchemy's compiler rewrites
them into whatever the driver takes (``?``, ``%(name)s``…), and for a positional style the
named values are picked into a tuple in the compiled order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import TextClause

from hermes_store.db.statement_caches import STATEMENT_CACHE_SIZE, LRUCache

# (SQL text, dialect class, paramstyle) → the SQL in the driver's parameter style and, for
# positional styles, what picks its parameters' values in order (None: named styles).
_ValuesOf = Callable[[Mapping[str, Any]], tuple[Any, ...]]
_driver_sql: LRUCache[tuple[str, type, str], tuple[str, _ValuesOf | None]] = LRUCache(STATEMENT_CACHE_SIZE)
# SQL text → its TextClause, for the public path.
_clauses: LRUCache[str, TextClause] = LRUCache(STATEMENT_CACHE_SIZE)


def in_driver_style(connection: Connection, sql: str, params: Mapping[str, Any]) -> tuple[str, Any]:
    """``sql`` with named ``:param`` placeholders in the driver's parameter style (done
    once per dialect by SQLAlchemy's compiler) and ``params`` in the matching form."""
    dialect = connection.dialect
    key = (sql, type(dialect), dialect.paramstyle)
    in_style = _driver_sql.get(key)
    if in_style is None:
        compiled = text_clause(sql).compile(dialect=dialect)
        # positiontup: the documented order of a positional style's parameters.
        values_of = _values_in_order(compiled.positiontup) if compiled.positional else None
        in_style = (compiled.string, values_of)
        _driver_sql.put(key, in_style)
    statement, values_of = in_style
    if values_of is None:
        return statement, dict(params)
    return statement, values_of(params)


def _values_in_order(names: Sequence[str] | None) -> _ValuesOf:
    """What turns named parameters into a positional style's tuple, in ``names``' order
    (an ``itemgetter``: per statement, a Python loop over the names costs a few µs more)."""
    if not names:
        return lambda _params: ()
    if len(names) == 1:
        (name,) = names
        return lambda params: (params[name],)
    return itemgetter(*names)


def text_clause(sql: str) -> TextClause:
    """``text(sql)``, parsed once per SQL text (SQLAlchemy's compiled cache keys on it)."""
    clause = _clauses.get(sql)
    if clause is None:
        clause = text(sql)
        _clauses.put(sql, clause)
    return clause
