"""The one place hermes_store executes SQL.

Every statement runs through SQLAlchemy's Core :class:`~sqlalchemy.engine.Connection`
machinery, never on a bare driver cursor, so that whatever listens to the engine sees all
of it: ``echo=True``, ``before_cursor_execute``/``after_cursor_execute`` listeners (query
counters, OpenTelemetry) and ``handle_error``. Errors therefore arrive in one family,
SQLAlchemy's ``DBAPIError`` subclasses, whichever method meets them; the unit of work
translates the ones that mean something (:mod:`hermes_store.db.sqlite_errors`) once.

Two ways in, chosen per statement:

* ORM/Core-built statements (:func:`run`) and hand-written SQL with an ``IN :name`` list
  go through :meth:`Connection.execute` — the list binds as SQLAlchemy's expanding
  parameter, and a textual ``SELECT`` is built once per SQL text with its result columns
  declared (learned on its first run), so SQLAlchemy caches its result metadata;
* every other hand-written statement (the hot path: append, ``get_session``, search,
  listing, replay, lineage, ``BEGIN``) runs on the *lean path*, :func:`driver_execute`:
  the steps of :meth:`Connection.exec_driver_sql` — execution context, events, echo, error
  wrapping — without building a result object, which costs a few microseconds instead of
  tens. Its SQL is put into the driver's parameter style once, by SQLAlchemy's compiler.

Columns named in ``content_keys`` hold message content and are mapped back from the
backend's storage form by :class:`hermes_store.schema.types.MessageContent`'s result processor.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import Executable, bindparam, column, orm, text
from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.sql.elements import TextClause

from hermes_store.schema.types import MessageContent

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


_driver_sql: dict[tuple[str, type], tuple[str, tuple[str, ...] | None]] = {}


def _translated(connection: Connection, sql: str, params: Mapping[str, Any]) -> tuple[str, Any]:
    """``sql`` with named ``:param`` placeholders in the driver's parameter style (done
    once per dialect by SQLAlchemy's compiler) and ``params`` in the matching form."""
    dialect = connection.dialect
    key = (sql, type(dialect))
    translated = _driver_sql.get(key)
    if translated is None:
        compiled = text(sql).compile(dialect=dialect)
        order = tuple(compiled.positiontup) if compiled.positional and compiled.positiontup else None
        translated = _driver_sql[key] = (compiled.string, order)
    statement, order = translated
    if order is None:
        return statement, dict(params)
    return statement, tuple([params[name] for name in order])


def _lean_path_available() -> bool:
    # The lean path uses the steps SQLAlchemy's own Connection._exec_single_context takes;
    # a SQLAlchemy without them gets exec_driver_sql instead.
    return all(
        hasattr(Connection, name) for name in ("_handle_dbapi_exception", "_log_info", "_has_events")
    ) and hasattr(DefaultExecutionContext, "_init_statement")


_LEAN = _lean_path_available()


class DriverResult(NamedTuple):
    """What a statement on the lean path returned: column names and rows (``None``, ``[]``
    for a statement that returns no rows)."""

    names: list[str] | None
    rows: list[Any]
    lastrowid: int | None = None
    """The driver cursor's ``lastrowid`` (SQLite: the rowid an ``INSERT`` just assigned)."""


def driver_execute(
    connection: Connection, statement: str, parameters: Any = (), *, begin: bool = True
) -> DriverResult:
    """Run ``statement`` (already in the driver's parameter style) on a driver cursor of
    ``connection`` the way SQLAlchemy's own execution does — the
    ``before_cursor_execute``/``after_cursor_execute`` events with an execution context,
    ``echo``, and errors wrapped by the connection (``handle_error``, invalidation on
    disconnect) — but without building a result object (SQLite: a few microseconds
    instead of tens). When no listener is set and ``echo`` is off, the execution context
    is built only if the statement fails (for the error's wrapping).

    ``begin=False`` is for the statement that begins the transaction itself.
    """
    if not _LEAN:
        result = connection.exec_driver_sql(statement, parameters)
        if not result.returns_rows:
            return DriverResult(None, [], result.lastrowid)
        return DriverResult(list(result.keys()), list(result.fetchall()))
    if begin and not connection.in_transaction():
        connection.begin()
    if connection._echo or _watched(connection.dispatch):
        return _observed_execute(connection, statement, parameters)
    # Nobody is watching statements: skip building the execution context (most of the
    # cost of this path) unless the statement fails and its error must be wrapped.
    cursor = None
    try:
        cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(statement, parameters)
        return _result(cursor)
    except BaseException as exc:
        context = None if cursor is None else _context_after_failure(connection, statement, parameters)
        connection._handle_dbapi_exception(exc, statement, parameters, cursor, context)
        raise  # not reached: the call above raises the wrapped error
    finally:
        if cursor is not None:
            _close_quietly(cursor)


def _close_quietly(cursor: Any) -> None:
    # As SQLAlchemy closes its cursors: a dead connection's cursor may refuse to close,
    # and that must not replace the error being raised. (Runs per statement: a plain
    # try costs nothing when nothing is raised, contextlib.suppress half a microsecond.)
    try:  # noqa: SIM105
        cursor.close()
    except Exception:
        pass


def _context_after_failure(connection: Connection, statement: str, parameters: Any) -> Any:
    """The execution context for wrapping a failed statement's error, or ``None`` when the
    connection can no longer give one (a dead server connection refuses a new cursor:
    SQLAlchemy then wraps the error without a context, as it does for a failed BEGIN)."""
    try:
        return _context(connection, statement, parameters)
    except Exception:
        return None


def _watched(dispatch: Any) -> bool:
    """Whether any ``before_cursor_execute``/``after_cursor_execute`` listener is set on
    the connection, its engine or their classes (checked per statement, so a listener
    added at any time sees the next statement)."""
    # The joined dispatcher's own truth test: a listener set on one connection upgrades
    # the collection that test holds, not the one the dispatcher's ``local`` names.
    return bool(dispatch.before_cursor_execute) or bool(dispatch.after_cursor_execute)


def _context(connection: Connection, statement: str, parameters: Any) -> Any:
    """The execution context ``exec_driver_sql`` would build for ``statement``."""
    dialect = connection.dialect
    # The dialect's own context class, as exec_driver_sql builds it.
    context: Any = dialect.execution_ctx_cls._init_statement(
        dialect,
        connection,
        connection.connection,
        connection.get_execution_options(),
        statement,
        [parameters],
    )
    return context


def _result(cursor: Any) -> DriverResult:
    description = cursor.description
    if description is None:
        return DriverResult(None, [], getattr(cursor, "lastrowid", None))
    return DriverResult([column[0] for column in description], list(cursor.fetchall()))


def _observed_execute(connection: Connection, statement: str, parameters: Any) -> DriverResult:
    """:func:`driver_execute` with listeners or echo: the steps of SQLAlchemy's own
    execution, with an execution context the listeners receive."""
    context = _context(connection, statement, parameters)
    cursor = context.cursor
    dispatch = connection.dispatch
    try:
        for listener in dispatch.before_cursor_execute:
            statement, parameters = listener(connection, cursor, statement, parameters, context, False)
        if connection._echo:
            connection._log_info(statement)
            connection._log_info("[driver SQL] %r", parameters)
        connection.dialect.do_execute(cursor, statement, parameters, context)
        dispatch.after_cursor_execute(connection, cursor, statement, parameters, context, False)
        return _result(cursor)
    except BaseException as exc:
        connection._handle_dbapi_exception(exc, statement, parameters, cursor, context)
        raise  # not reached: the call above raises the wrapped error
    finally:
        cursor.close()


def run_driver_sql(db: Bind, sql: str, params: Mapping[str, Any]) -> list[Any]:
    """Run a short hand-written statement (named ``:param`` placeholders, no list values,
    values already in the driver's form) on the lean path of :func:`driver_execute`.
    For the hot path of writes; returns the rows, if the statement returns any."""
    return driver_sql_result(db, sql, params).rows


def driver_sql_result(db: Bind, sql: str, params: Mapping[str, Any]) -> DriverResult:
    """:func:`run_driver_sql`, returning the whole :class:`DriverResult` (``lastrowid``)."""
    connection = connection_of(db)
    statement, parameters = _translated(connection, sql, params)
    return driver_execute(connection, statement, parameters)


def _expanding(sql: str, values: Mapping[str, Any]) -> frozenset[str]:
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


def _execute_text(
    db: Bind, sql: str, params: Mapping[str, Any] | None, content: tuple[str, ...]
) -> CursorResult[Any]:
    values = dict(params or {})
    expanding = _expanding(sql, values)
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


def _fetch(
    db: Bind, sql: str, params: Mapping[str, Any] | None, content: tuple[str, ...]
) -> tuple[list[str], list[Any]]:
    values = params or {}
    if _expanding(sql, values):
        # An IN list: SQLAlchemy's expanding parameters, through Core.
        result = _execute_text(db, sql, values, content)
        return list(result.keys()), list(result.fetchall())
    connection = connection_of(db)
    statement, parameters = _translated(connection, sql, values)
    lean = driver_execute(connection, statement, parameters)
    names, rows = lean.names or [], lean.rows
    if content:
        to_python = _CONTENT.result_processor(connection.dialect, None)
        if to_python is not None:  # what the column type's result processing would do
            positions = [names.index(name) for name in content]
            rows = [list(row) for row in rows]
            for row in rows:
                for position in positions:
                    row[position] = to_python(row[position])
    return names, rows


def fetch_dicts(
    db: Bind,
    sql: str,
    params: Mapping[str, Any] | None = None,
    content_keys: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """Rows of ``sql`` as dicts. List values in ``params`` expand for ``IN :name``.

    ``content_keys`` name columns holding message content, mapped back from the
    backend's storage form by :class:`hermes_store.schema.types.MessageContent`'s result
    processor. Statements without a list run on the lean path (:func:`driver_execute`).
    """
    names, rows = _fetch(db, sql, params, tuple(content_keys))
    return [dict(zip(names, row, strict=True)) for row in rows]


def fetch_tuples(
    db: Bind, sql: str, params: Mapping[str, Any] | None = None, content_keys: Iterable[str] = ()
) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` as tuples, same binding and content rules as :func:`fetch_dicts`."""
    return [tuple(row) for row in _fetch(db, sql, params, tuple(content_keys))[1]]


def scalar_text(db: Bind, statement: Executable) -> str | None:
    """The first column of the first row of ``statement`` (a text column), or ``None``."""
    value = run(db, statement).scalar()
    return None if value is None else str(value)


def copy_rows(
    connection: Connection, statement: str, rows: Iterable[Sequence[Any]], *, types: Sequence[str] = ()
) -> int:
    """Stream ``rows`` into ``COPY … FROM STDIN`` (``statement``) on ``connection``'s
    psycopg 3 connection, inside the connection's transaction; returns how many rows.

    The rows do not pass through SQLAlchemy at all: they travel as the COPY protocol's
    data messages, written by psycopg's ``Copy`` object, and SQLAlchemy's cursor events
    only fire around the ``execute``/``executemany`` calls SQLAlchemy makes itself. So
    the statement is made visible here the way :func:`driver_execute` does it: the
    ``before_cursor_execute``/``after_cursor_execute`` listeners receive it once (with no
    parameters), ``echo`` logs it and then the number of rows sent, and driver errors are
    wrapped by the connection (``handle_error``, invalidation on disconnect). ``types``
    (PostgreSQL type names, one per column) are needed for ``FORMAT BINARY`` only.
    """
    if not connection.in_transaction():
        connection.begin()
    context = _context(connection, statement, ()) if _LEAN else None
    # The cursor of SQLAlchemy's execution context when there is one (listeners get it);
    # otherwise one of the driver connection, reached through SQLAlchemy's public API.
    cursor = context.cursor if context is not None else connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    dispatch = connection.dispatch
    try:
        if context is not None:
            for listener in dispatch.before_cursor_execute:
                statement, _ = listener(connection, cursor, statement, (), context, False)
        if connection._echo:
            connection._log_info(statement)
        count = 0
        with cursor.copy(statement) as copy:
            if types:
                copy.set_types(list(types))
            write = copy.write_row
            for row in rows:
                write(row)
                count += 1
        if connection._echo:
            connection._log_info("[COPY] %d rows", count)
        if context is not None:
            dispatch.after_cursor_execute(connection, cursor, statement, (), context, False)
        return count
    except BaseException as exc:
        connection._handle_dbapi_exception(exc, statement, (), cursor, context)
        raise  # not reached: the call above raises the wrapped error
    finally:
        _close_quietly(cursor)
