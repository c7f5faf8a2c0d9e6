"""The one place hermes_store executes SQL.

Every statement runs on a SQLAlchemy :class:`~sqlalchemy.engine.Connection` — through its
public execution whenever anything watches, on that connection's own driver cursor only
while nothing does — so that whatever listens to the engine sees all of it: ``echo=True``,
``before_execute``/``after_execute`` and ``before_cursor_execute``/``after_cursor_execute``
listeners (query counters, OpenTelemetry), ``do_execute`` and ``handle_error``. Errors
therefore arrive in one family, SQLAlchemy's ``DBAPIError`` subclasses, whichever method
meets them; the unit of work translates the ones that mean something
(:mod:`hermes_store.db.sqlite_errors`) once.

Two ways in, chosen per statement:

* ORM/Core-built statements (:func:`run`) and hand-written SQL with an ``IN :name`` list
  go through :meth:`Connection.execute` — the list binds as SQLAlchemy's expanding
  parameter, and a textual ``SELECT`` is built once per SQL text with its result columns
  declared (learned on its first run), so SQLAlchemy caches its result metadata;
* every other hand-written statement (the hot path: append, ``get_session``, search,
  listing, replay, lineage, ``BEGIN``) goes to :func:`driver_execute`, with its SQL put
  into the driver's parameter style once by SQLAlchemy's compiler. While anything
  watches statements it runs through SQLAlchemy's public execution, so every listener
  gets what SQLAlchemy gives it: :meth:`Connection.execute` for a ``before_execute``/
  ``after_execute`` listener, :meth:`Connection.exec_driver_sql` for echo, logging, the
  cursor events, ``handle_error`` or ``do_execute``. While nothing does, on a bare driver
  cursor of the same connection, without the result object (a few microseconds instead
  of tens). Telling the two apart and wrapping the bare cursor's errors as SQLAlchemy does take
  SQLAlchemy private members, all in :mod:`hermes_store.db.sqlalchemy_private` behind a
  version and feature guard: where they are missing, every statement takes the public path.

Both statement caches (SQL text → driver form, SQL text → prepared ``SELECT``) are
bounded, least recently used first out: search builds a new SQL text per query shape,
so their keys grow with what users type.

Columns named in ``content_keys`` hold message content and are mapped back from the
backend's storage form by :class:`hermes_store.db.column_types.MessageContent`'s result processor.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any, Generic, NamedTuple, TypeVar

from sqlalchemy import Executable, bindparam, column, orm, text
from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.sql.elements import TextClause

from hermes_store.db import sqlalchemy_private
from hermes_store.db.column_types import MessageContent
from hermes_store.db.sqlalchemy_private import Route

Bind = orm.Session | Connection
_CONTENT = MessageContent()
NO_BEGIN_OPTION = "hermes_store_no_begin"
"""Execution option: leave SQLite in autocommit mode (for VACUUM and checkpoints); the
SQLite engine's ``begin`` hook (:mod:`hermes_store.db.engine`) then emits no ``BEGIN``."""
STATEMENT_CACHE_SIZE = 512
"""Entries each statement cache keeps (the least recently used goes first)."""

K = TypeVar("K")
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """A mapping of at most ``capacity`` entries that drops the least recently used.

    Safe to share between threads without a lock: an entry another thread evicted
    between two steps is simply missing (computed again), never an error.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value for ``key`` (now the most recently used), or ``None``."""
        value = self._entries.get(key)
        if value is not None:
            # Per statement: a plain try costs nothing here, contextlib.suppress ~0.5 µs.
            try:  # noqa: SIM105
                self._entries.move_to_end(key)
            except KeyError:  # evicted by another thread meanwhile; the value still holds
                pass
        return value

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` for ``key``, evicting the least recently used past capacity."""
        self._entries[key] = value
        while len(self._entries) > self.capacity:
            try:
                self._entries.popitem(last=False)
            except KeyError:  # emptied by another thread meanwhile
                break

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()


_Key = tuple[str, frozenset[str], tuple[str, ...]]
# SQL text → its statement with declared result columns (filled after the first run).
_prepared: LRUCache[_Key, Executable] = LRUCache(STATEMENT_CACHE_SIZE)
# (SQL text, dialect class, paramstyle) → the SQL in the driver's parameter style and, for
# positional styles, what picks its parameters' values in order (None: named styles).
_ValuesOf = Callable[[Mapping[str, Any]], tuple[Any, ...]]
_driver_sql: LRUCache[tuple[str, type, str], tuple[str, _ValuesOf | None]] = LRUCache(STATEMENT_CACHE_SIZE)
# SQL text → its TextClause, for the public path.
_clauses: LRUCache[str, TextClause] = LRUCache(STATEMENT_CACHE_SIZE)


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


def _translated(connection: Connection, sql: str, params: Mapping[str, Any]) -> tuple[str, Any]:
    """``sql`` with named ``:param`` placeholders in the driver's parameter style (done
    once per dialect by SQLAlchemy's compiler) and ``params`` in the matching form."""
    dialect = connection.dialect
    key = (sql, type(dialect), dialect.paramstyle)
    translated = _driver_sql.get(key)
    if translated is None:
        compiled = _clause(sql).compile(dialect=dialect)
        # positiontup: the documented order of a positional style's parameters.
        values_of = _values_in_order(compiled.positiontup) if compiled.positional else None
        translated = (compiled.string, values_of)
        _driver_sql.put(key, translated)
    statement, values_of = translated
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


def _clause(sql: str) -> TextClause:
    """``text(sql)``, parsed once per SQL text (SQLAlchemy's compiled cache keys on it)."""
    clause = _clauses.get(sql)
    if clause is None:
        clause = text(sql)
        _clauses.put(sql, clause)
    return clause


class DriverResult(NamedTuple):
    """What a statement run by :func:`driver_execute` returned: column names and rows
    (``None``, ``[]`` for a statement that returns no rows)."""

    names: list[str] | None
    rows: list[Any]
    lastrowid: int | None = None
    """The driver cursor's ``lastrowid`` (SQLite: the rowid an ``INSERT`` just assigned)."""


_NO_PARAMETERS: Mapping[str, Any] = {}
_ROUTE_KEY = "hermes_store_route"
"""``Connection.info`` key of the way :func:`remember_route` chose for the transaction."""
_DRIVER_TRANSACTION_KEY = "hermes_store_driver_transaction"
"""``Connection.info`` key of the open :func:`begin_driver_transaction` transaction
(a :class:`DriverTransaction`), ``None`` when there is none."""


class DriverTransaction:
    """An open transaction begun by :func:`begin_driver_transaction`, with what its
    statements need looked up once: the way they go, the driver connection and, on the
    bare-cursor way, one cursor they share. A write's statements then cost one
    dictionary lookup each instead of a chain of SQLAlchemy properties and a cursor of
    their own (about 1.5 µs a statement)."""

    __slots__ = ("cursor", "driver_connection", "route")

    def __init__(self, route: Route, driver_connection: Any) -> None:
        self.route = route
        self.driver_connection = driver_connection
        self.cursor: Any = None

    def execute(self, connection: Connection, statement: str, parameters: Any) -> Any:
        """Run ``statement`` (in the driver's parameter style) on the shared cursor;
        returns that cursor. A failed statement's cursor is dropped (SQLAlchemy's error
        handling closes it) and the next statement opens another."""
        cursor = self.cursor
        if cursor is None:
            cursor = self.cursor = self.driver_connection.cursor()
        try:
            cursor.execute(statement, parameters)
        except BaseException as exc:
            self.cursor = None
            sqlalchemy_private.raise_driver_error(connection, exc, statement, parameters, cursor)
        return cursor

    def close_cursor(self) -> None:
        """Close the shared cursor, if one is open (as the transaction ends)."""
        cursor, self.cursor = self.cursor, None
        if cursor is not None:
            _close_quietly(cursor)


def driver_execute(
    connection: Connection,
    sql: str,
    params: Mapping[str, Any] = _NO_PARAMETERS,
    *,
    begin: bool = True,
    route: Route | None = None,
) -> DriverResult:
    """Run the hand-written ``sql`` (named ``:param`` placeholders, values in the driver's
    form, no list values) on ``connection``; rows come back as the driver gives them.

    The way depends on who watches (:func:`sqlalchemy_private.route`): a
    ``before_execute``/``after_execute`` listener gets :meth:`Connection.execute`
    (Core, SQLAlchemy's compiled cache: every event fires); echo, logging, a cursor
    event, ``do_execute`` or ``handle_error`` get :meth:`Connection.exec_driver_sql`;
    when nothing watches, the statement runs in the driver's parameter style on a bare
    driver cursor of the same connection, with SQLAlchemy's error wrapping
    (``DBAPIError`` family, invalidation on disconnect) and no result object. Inside a
    transaction begun on an engine with hermes_store's ``begin`` hook (SQLite), or by
    :func:`begin_driver_transaction`, the way is the one decided as the transaction
    began; otherwise it is decided for this statement (or given as ``route``).

    ``begin=False`` is for statements outside a transaction: the ``BEGIN`` itself, a WAL
    checkpoint on the idle write connection.
    """
    if begin:
        info = connection.info  # one lookup: a property chain down to the pool's record
        transaction: DriverTransaction | None = info.get(_DRIVER_TRANSACTION_KEY)
        if transaction is not None:
            if transaction.route is Route.BARE_CURSOR:
                statement, parameters = _translated(connection, sql, params)
                return _result(transaction.execute(connection, statement, parameters))
            return _public_execute(connection, transaction.route, sql, params)
        if not connection.in_transaction():
            connection.begin()
        route = route or info.get(_ROUTE_KEY) or sqlalchemy_private.route(connection)
    elif route is None:
        route = sqlalchemy_private.route(connection)
    if route is not Route.BARE_CURSOR:
        if begin or connection.in_transaction():
            return _public_execute(connection, route, sql, params)
        return _public_execute_outside_a_transaction(connection, route, sql, params)
    statement, parameters = _translated(connection, sql, params)
    cursor = None
    try:
        cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(statement, parameters)
        return _result(cursor)
    except BaseException as exc:
        sqlalchemy_private.raise_driver_error(connection, exc, statement, parameters, cursor)
    finally:
        if cursor is not None:
            _close_quietly(cursor)


def begin_driver_transaction(connection: Connection, sql: str) -> DriverTransaction:
    """Begin a transaction at the driver with ``sql`` (``BEGIN IMMEDIATE``), through the
    seam, so that what watches statements sees it; end it with
    :func:`end_driver_transaction` (given the returned transaction, which saves looking
    it up).

    For the SQLite write connection, whose every write is one short transaction: run by
    the driver instead of by SQLAlchemy's :class:`~sqlalchemy.engine.RootTransaction`,
    it costs two statements, where SQLAlchemy's ``begin``/``commit`` (its event dispatch
    and the ``begin`` hook around the same two statements) cost about 40 µs an append in
    place (CHANGELOG.md, 2026-12-02). Statements of the seam run inside it without
    beginning anything; SQLAlchemy's own execution (``Connection.execute``, an ORM flush)
    still opens its transaction as bookkeeping, so ``connection`` must carry
    :data:`NO_BEGIN_OPTION` (that transaction then sends no ``BEGIN`` of its own), and
    :func:`end_driver_transaction` closes it. The way statements go is decided here,
    once (:func:`decide_route`).
    """
    if not connection.get_execution_options().get(NO_BEGIN_OPTION):
        raise ValueError(f"a driver transaction needs a connection with the {NO_BEGIN_OPTION} option")
    transaction = DriverTransaction(decide_route(connection), connection.connection.dbapi_connection)
    connection.info[_DRIVER_TRANSACTION_KEY] = transaction
    _driver_transaction_statement(connection, transaction, sql)
    return transaction


def end_driver_transaction(
    connection: Connection, *, commit: bool, transaction: DriverTransaction | None = None
) -> None:
    """``COMMIT`` (or ``ROLLBACK``) the transaction :func:`begin_driver_transaction` began,
    through the seam, then close SQLAlchemy's bookkeeping transaction if a statement
    opened one (nothing reaches the driver: its transaction is already over). If the
    ``COMMIT`` fails, the driver's transaction may still be open: the caller rolls it back
    (``commit=False``) or discards the connection."""
    if transaction is None:
        transaction = connection.info.get(_DRIVER_TRANSACTION_KEY)
        if transaction is None:
            raise ValueError("no driver transaction is open on this connection")
    _driver_transaction_statement(connection, transaction, "COMMIT" if commit else "ROLLBACK")
    transaction.close_cursor()
    _forget_driver_transaction(connection, commit=commit)


def abandon_driver_transaction(connection: Connection) -> None:
    """Forget a :func:`begin_driver_transaction` transaction the driver no longer has (its
    ``BEGIN`` failed, or a failed ``COMMIT`` ended it), rolling back SQLAlchemy's
    bookkeeping transaction if one is open; nothing is sent to the driver."""
    transaction: DriverTransaction | None = connection.info.get(_DRIVER_TRANSACTION_KEY)
    if transaction is not None:
        transaction.close_cursor()
    _forget_driver_transaction(connection, commit=False)


def _forget_driver_transaction(connection: Connection, *, commit: bool) -> None:
    # The bookkeeping transaction's end sends nothing: the driver's is over already.
    connection.info[_DRIVER_TRANSACTION_KEY] = None
    bookkeeping = connection.get_transaction()
    if bookkeeping is not None:
        if commit:
            bookkeeping.commit()
        else:
            bookkeeping.rollback()


def in_driver_transaction(connection: Connection) -> bool:
    """Whether :func:`begin_driver_transaction` began a transaction on ``connection`` that
    :func:`end_driver_transaction` has not ended."""
    return connection.info.get(_DRIVER_TRANSACTION_KEY) is not None


def _driver_transaction_statement(connection: Connection, transaction: DriverTransaction, sql: str) -> None:
    if transaction.route is not Route.BARE_CURSOR:
        # Inside SQLAlchemy's bookkeeping transaction (opened here if need be, sending
        # nothing: NO_BEGIN_OPTION), so that it does not commit around the statement.
        _public_execute(connection, transaction.route, sql, _NO_PARAMETERS)
    else:
        transaction.execute(connection, sql, ())


def decide_route(connection: Connection) -> Route:
    """Which way the statements of a transaction beginning on ``connection`` go
    (:func:`sqlalchemy_private.route`), given who watches now: called once per
    transaction, so a listener added while a transaction is open sees the statements of
    the next one. Deciding once saves about 4 µs a statement."""
    route = sqlalchemy_private.route(connection)
    if route is Route.BARE_CURSOR and sqlalchemy_private.watches_transaction_ends(connection):
        # Only the public path opens SQLAlchemy's transaction around a driver-run one,
        # and only that transaction fires commit/rollback events.
        route = Route.DRIVER_SQL
    return route


def remember_route(connection: Connection) -> Route:
    """:func:`decide_route` for a transaction SQLAlchemy begins, kept for its statements
    in ``connection.info``.

    Called by the SQLite engine's ``begin`` hook, which runs for every transaction of
    every connection of that engine, so the kept way is always the current
    transaction's.
    """
    route = decide_route(connection)
    connection.info[_ROUTE_KEY] = route
    return route


def _public_execute(
    connection: Connection, route: Route, sql: str, params: Mapping[str, Any]
) -> DriverResult:
    """:func:`driver_execute` through SQLAlchemy's public execution: Core or driver SQL."""
    if route is Route.CORE:
        result = connection.execute(_clause(sql), dict(params))
    else:
        result = connection.exec_driver_sql(*_translated(connection, sql, params))
    if not result.returns_rows:
        # Only drivers whose dialect reads lastrowid have one (psycopg's cursor has none).
        lastrowid = result.lastrowid if getattr(connection.dialect, "postfetch_lastrowid", False) else None
        return DriverResult(None, [], lastrowid)
    return DriverResult(list(result.keys()), list(result.fetchall()))


def _public_execute_outside_a_transaction(
    connection: Connection, route: Route, sql: str, params: Mapping[str, Any]
) -> DriverResult:
    """:func:`_public_execute` for a statement that must run outside a transaction:
    SQLAlchemy begins one for every execute, so the begin hook is told to emit no
    ``BEGIN`` and SQLAlchemy's transaction is ended right after (nothing to commit)."""
    previous = connection.get_execution_options().get(NO_BEGIN_OPTION, False)
    connection.execution_options(**{NO_BEGIN_OPTION: True})
    try:
        return _public_execute(connection, route, sql, params)
    finally:
        connection.execution_options(**{NO_BEGIN_OPTION: previous})
        connection.commit()


def _close_quietly(cursor: Any) -> None:
    # As SQLAlchemy closes its cursors: a dead connection's cursor may refuse to close,
    # and that must not replace the error being raised. (Runs per statement: a plain
    # try costs nothing when nothing is raised, contextlib.suppress half a microsecond.)
    try:  # noqa: SIM105
        cursor.close()
    except Exception:
        pass


def _result(cursor: Any) -> DriverResult:
    description = cursor.description
    if description is None:
        return DriverResult(None, [], getattr(cursor, "lastrowid", None))
    return DriverResult([column[0] for column in description], list(cursor.fetchall()))


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
        _prepared.put(key, first.columns(*declared))
    return result


def _fetch(
    db: Bind, sql: str, params: Mapping[str, Any] | None, content: tuple[str, ...]
) -> tuple[list[str], list[Any]]:
    values = params or {}
    if _expanding(sql, values):
        # An IN list: SQLAlchemy's expanding parameters, through Core.
        expanded = _execute_text(db, sql, values, content)
        return list(expanded.keys()), list(expanded.fetchall())
    connection = connection_of(db)
    result = driver_execute(connection, sql, values)
    names, rows = result.names or [], result.rows
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
    backend's storage form by :class:`hermes_store.db.column_types.MessageContent`'s result
    processor. Statements without a list run through :func:`driver_execute`.
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
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        statement = sqlalchemy_private.announce_copy(connection, cursor, statement)
        count = 0
        with cursor.copy(statement) as copy:
            if types:
                copy.set_types(list(types))
            write = copy.write_row
            for row in rows:
                write(row)
                count += 1
        sqlalchemy_private.announce_copy(connection, cursor, statement, rows_sent=count)
        return count
    except BaseException as exc:
        sqlalchemy_private.raise_driver_error(connection, exc, statement, (), cursor)
    finally:
        _close_quietly(cursor)
