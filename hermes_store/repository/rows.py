"""Running hand-written read SQL and getting plain dicts back, cheaply.

The listing, search and replay queries return many rows of many columns, and on SQLite
SQLAlchemy's result machinery costs more than the query itself. On SQLite these
functions therefore run the SQL on the session's driver connection (inside the
session's transaction, with sqlite3's named ``:param`` binding); on other backends
they go through :func:`sqlalchemy.text`. The SQL is the same text either way, and user
values are always bound, never formatted into it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import bindparam, orm, text

from hermes_store.types import content_from_storage

_PARAM = re.compile(r"(?<![:\w]):(\w+)\b")


def _expand_lists(sql: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Replace ``:name`` bound to a list with ``(:name_0, :name_1, …)`` for sqlite3."""
    lists = {name for name, value in params.items() if isinstance(value, list | tuple)}
    if not lists:
        return sql, params
    expanded = {k: v for k, v in params.items() if k not in lists}

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in lists:
            return match.group(0)
        values = params[name]
        if not values:
            return "(SELECT NULL WHERE 0)"
        for index, value in enumerate(values):
            expanded[f"{name}__{index}"] = value
        return "(" + ", ".join(f":{name}__{index}" for index in range(len(values))) + ")"

    return _PARAM.sub(substitute, sql), expanded


def _execute(db: orm.Session, sql: str, params: dict[str, Any] | None) -> tuple[list[str], list[Any], str]:
    values = dict(params or {})
    connection = db.connection()
    dialect = connection.dialect.name
    if dialect == "sqlite":
        sql, values = _expand_lists(sql, values)
        cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(sql, values)
            names = [column[0] for column in cursor.description]
            return names, cursor.fetchall(), dialect
        finally:
            cursor.close()
    statement = text(sql)
    lists = [name for name, value in values.items() if isinstance(value, list | tuple)]
    if lists:
        statement = statement.bindparams(*(bindparam(name, expanding=True) for name in lists))
    result = db.execute(statement, values)
    return list(result.keys()), [tuple(row) for row in result], dialect


def fetch_dicts(
    db: orm.Session,
    sql: str,
    params: dict[str, Any] | None = None,
    content_keys: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """Rows of ``sql`` as dicts. List values in ``params`` expand for ``IN :name``.

    ``content_keys`` name columns holding message content, mapped back from the
    backend's storage form (see :mod:`hermes_store.types`).
    """
    names, rows, dialect = _execute(db, sql, params)
    dicts = [dict(zip(names, row, strict=True)) for row in rows]
    if dialect != "sqlite":
        for item in dicts:
            for key in content_keys:
                item[key] = content_from_storage(item[key], dialect)
    return dicts


def fetch_tuples(
    db: orm.Session, sql: str, params: dict[str, Any] | None = None, content_index: int | None = None
) -> Sequence[Any]:
    """Rows of ``sql`` as tuples, same binding rules as :func:`fetch_dicts`.

    ``content_index`` is the position of a message-content column to map back.
    """
    _names, rows, dialect = _execute(db, sql, params)
    if dialect == "sqlite" or content_index is None:
        return rows
    return [
        (*row[:content_index], content_from_storage(row[content_index], dialect), *row[content_index + 1 :])
        for row in rows
    ]
