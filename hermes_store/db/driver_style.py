"""Hand-written SQL put into the driver's parameter style, once per SQL text and dialect.

Hand-written statements name their parameters ``:name``; SQLAlchemy's compiler rewrites
them into whatever the driver takes (``?``, ``%(name)s``…), and for a positional style the
named values are picked into a tuple in the compiled order.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.elements import TextClause

from hermes_store.db.statement_caches import STATEMENT_CACHE_SIZE, LRUCache

# The SQL in the driver's parameter style and, for positional styles, what picks its
# parameters' values in order (None: named styles).
_ValuesOf = Callable[[Mapping[str, Any]], tuple[Any, ...]]
InDriverStyle = tuple[str, _ValuesOf | None]


class StyleCache:
    """SQL texts already put into one dialect's parameter style, at most
    :data:`STATEMENT_CACHE_SIZE` of them, the ones in use kept.

    Two generations of plain dicts: a statement is looked up in :attr:`recent` with one
    ``dict.get`` (an LRU's bookkeeping costs two more calls per statement, on every
    append); a miss (:meth:`miss`) moves it there from :attr:`older`, or compiles it.
    When :attr:`recent` holds half the capacity it becomes :attr:`older` and the one
    before is dropped: whatever was not used since then goes.
    """

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.recent: dict[str, InDriverStyle] = {}
        self.older: dict[str, InDriverStyle] = {}

    def miss(self, sql: str) -> InDriverStyle:
        """``sql`` in the driver's style, now in :attr:`recent` (compiled if need be)."""
        in_style = self.older.get(sql)
        if in_style is None:
            compiled = text_clause(sql).compile(dialect=self.dialect)
            # positiontup: the documented order of a positional style's parameters.
            values_of = _values_in_order(compiled.positiontup) if compiled.positional else None
            in_style = (compiled.string, values_of)
        if len(self.recent) >= STATEMENT_CACHE_SIZE // 2:
            self.older, self.recent = self.recent, {}
        self.recent[sql] = in_style
        return in_style

    def __len__(self) -> int:
        return len(self.recent) + len(self.older)


# (dialect class, paramstyle) → its StyleCache.
_styles: dict[tuple[type, str], StyleCache] = {}
# SQL text → its TextClause, for the public path.
_clauses: LRUCache[str, TextClause] = LRUCache(STATEMENT_CACHE_SIZE)


def in_driver_style(connection: Connection, sql: str, params: Mapping[str, Any]) -> tuple[str, Any]:
    """``sql`` with named ``:param`` placeholders in the driver's parameter style (done
    once per dialect by SQLAlchemy's compiler) and ``params`` in the matching form."""
    styles = styles_for(connection.dialect)
    return bind(styles.recent.get(sql) or styles.miss(sql), params)


def styles_for(dialect: Dialect) -> StyleCache:
    """The cache of SQL texts in ``dialect``'s parameter style."""
    key = (type(dialect), dialect.paramstyle)
    styles = _styles.get(key)
    if styles is None:
        styles = _styles.setdefault(key, StyleCache(dialect))
    return styles


def bind(in_style: InDriverStyle, params: Mapping[str, Any]) -> tuple[str, Any]:
    """The statement of ``in_style`` and ``params`` in the form its style takes."""
    statement, values_of = in_style
    if values_of is None:
        return statement, dict(params)
    return statement, values_of(params)


def _values_in_order(names: Sequence[str] | None) -> _ValuesOf:
    """What turns named parameters into a positional style's tuple, in ``names``' order
    (an ``itemgetter``: per statement, a Python loop over the names costs a few µs more).

    The names are interned: the compiler cuts them out of the SQL text, so they are equal
    to the callers' keys (string literals, interned by Python) but not the same objects,
    and each lookup would then compare the strings' bytes (about 3,000 CPU instructions
    an append)."""
    if not names:
        return lambda _params: ()
    interned = [sys.intern(name) for name in names]
    if len(interned) == 1:
        (name,) = interned
        return lambda params: (params[name],)
    return itemgetter(*interned)


def text_clause(sql: str) -> TextClause:
    """``text(sql)``, parsed once per SQL text (SQLAlchemy's compiled cache keys on it)."""
    clause = _clauses.get(sql)
    if clause is None:
        clause = text(sql)
        _clauses.put(sql, clause)
    return clause
