"""Every use of a SQLAlchemy private member in hermes_store, behind one guard.

The execution seam (:mod:`hermes_store.db.execution`) runs a hand-written statement on a
bare driver cursor when nothing watches statements, and through the public
:meth:`Connection.exec_driver_sql` or :meth:`Connection.execute` when anything does. The
bare cursor saves about 10 µs a statement, 30 µs an append (CHANGELOG.md, 2026-12-02).
Two things SQLAlchemy does not offer publicly make that safe:

* **Is anything watching?** ``Connection._echo`` (echo or the ``sqlalchemy.engine``
  logger at INFO), ``Dialect._has_events`` and the truth value of the listener
  collections on ``connection.dispatch`` (joined over the connection, its engine and
  their classes) and ``dialect.dispatch``, for every event SQLAlchemy's execution fires
  (and, for SQLite's driver-run write transactions, ``commit``/``rollback``:
  :func:`watches_transaction_ends`).
  When any is set, the seam takes a public path (:class:`Route`), so listeners get
  exactly what SQLAlchemy gives them.
* **Has any listener come or gone?** (:func:`listeners_fingerprint`) SQLAlchemy keeps
  every registered listener of every event in one registry
  (``sqlalchemy.event.registry._key_to_collection``, keyed by target, event and
  function, in registration order); its size and newest key tell, in a few hundred CPU
  instructions, whether the answer above can have changed, so that the seam asks it once
  per change rather than once per transaction (about 20,000 instructions an append).
* **Wrapping a failed statement's error** as SQLAlchemy does: ``Connection.
  _handle_dbapi_exception`` turns a driver error into SQLAlchemy's ``DBAPIError`` family
  and invalidates the connection on a disconnect (the unit of work then retries on a new
  one). It is called without an execution context, as SQLAlchemy itself does for errors
  raised before one exists; no ``handle_error`` listener can be set on this path (see
  above), so nothing sees the missing context.

* **Following echo and logging on a kept connection** (:func:`follow_echo`): a
  ``Connection`` reads ``Engine._should_log_info()`` once, when it is made, into
  ``Connection._echo``, which SQLAlchemy's own execution consults to log. The store keeps
  its write connection (and SQLite's idle read connections) for its whole life, so echo
  or the ``sqlalchemy.engine`` logger switched on after it opened would never show their
  statements; the seam sets the flag afresh as each transaction begins.

* **Showing a COPY** (:func:`announce_copy`): psycopg's ``COPY … FROM STDIN`` cannot run
  through SQLAlchemy, so the statement is handed to the cursor listeners and to echo
  (``Connection._log_info``) by hand, once per batch.

Checked against SQLAlchemy 2.0.44 (the lowest pyproject.toml allows) and 2.1.9 (the
newest); ``.ci/run`` runs the seam's tests on both ends. On a SQLAlchemy outside
:data:`CHECKED_RANGE`, or one without these members, :data:`AVAILABLE` is false and every
statement takes the public path: slower, never wrong.
"""

from __future__ import annotations

import enum
import logging
from typing import Any, NoReturn

import sqlalchemy
from sqlalchemy.engine import Connection
from sqlalchemy.engine.events import ConnectionEvents, DialectEvents
from sqlalchemy.event import registry as event_registry

_INFO = logging.INFO

CHECKED_RANGE = ((2, 0), (2, 1))
"""The SQLAlchemy releases (major, minor) whose internals this module was checked against."""

# The events Connection.exec_driver_sql fires for one statement, on the connection's
# dispatcher and on its dialect's. A listener on any of them sends statements to the
# public path.
_CONNECTION_EVENTS = ("before_execute", "after_execute", "before_cursor_execute", "after_cursor_execute")
_DIALECT_EVENTS = ("do_execute", "do_execute_no_params", "handle_error")
# Looked at by watches_transaction_ends only (PostgreSQL's reply watchdog listens to both
# on every server engine; ``begin`` is hermes_store's own BEGIN hook on SQLite engines).
_TRANSACTION_EVENTS = ("commit", "rollback")


def _release(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def supported(version: str) -> bool:
    """Whether SQLAlchemy ``version`` is one this module's private members were checked on."""
    return _release(version) in CHECKED_RANGE


def _members_present() -> bool:
    # A feature test besides the version check: a patch release that renamed one of
    # them must fall back to the public path, not fail with AttributeError.
    return (
        callable(getattr(Connection, "_handle_dbapi_exception", None))
        and isinstance(getattr(event_registry, "_key_to_collection", None), dict)
        and all(hasattr(ConnectionEvents, name) for name in _CONNECTION_EVENTS + _TRANSACTION_EVENTS)
        and all(hasattr(DialectEvents, name) for name in _DIALECT_EVENTS)
    )


AVAILABLE = supported(sqlalchemy.__version__) and _members_present()
"""Whether the seam may run statements on a bare driver cursor when nothing watches."""


class Route(enum.Enum):
    """How the seam runs a hand-written statement, given who watches it."""

    BARE_CURSOR = "bare cursor"
    """Nothing watches: the driver's cursor, no execution context, no result object."""
    DRIVER_SQL = "exec_driver_sql"
    """Echo, logging or a cursor, ``do_execute`` or ``handle_error`` listener:
    :meth:`Connection.exec_driver_sql`, which shows the statement to all of them."""
    CORE = "execute"
    """A ``before_execute``/``after_execute`` listener (which ``exec_driver_sql`` does not
    fire), or a SQLAlchemy this module was not checked on: :meth:`Connection.execute`,
    which fires every event."""


def follow_echo(connection: Connection) -> bool:
    """Set ``connection``'s echo flag to what its engine's ``echo`` and the
    ``sqlalchemy.engine`` logger ask for now, as SQLAlchemy does for a new connection;
    whether that changed it. A few hundred CPU instructions: a logger's answer is cached
    by :mod:`logging` until a level changes."""
    # Engine._should_log_info(), inline (one call fewer): this runs for every transaction.
    echo = connection.engine.logger.isEnabledFor(_INFO)
    # Both are bools. getattr: a SQLAlchemy without the member is not followed, never broken.
    if echo is getattr(connection, "_echo", echo):
        return False
    connection._echo = echo
    return True


def route(connection: Connection) -> Route:
    """Which way statements on ``connection`` go, given who watches now (about 3 µs; the
    seam decides it once per transaction where the ``begin`` hook runs, see
    :func:`hermes_store.db.route_choice.decide_route`). The connection's echo flag is
    brought up to date on the way (:func:`follow_echo`)."""
    if not AVAILABLE:
        return Route.CORE
    follow_echo(connection)
    # The joined dispatcher's own truth test: a listener set on one connection upgrades
    # the collection that test holds, not the one the dispatcher's ``local`` names.
    dispatch: Any = connection.dispatch
    if dispatch.before_execute or dispatch.after_execute:
        return Route.CORE
    if getattr(connection, "_echo", True) or dispatch.before_cursor_execute or dispatch.after_cursor_execute:
        return Route.DRIVER_SQL
    dialect: Any = connection.dialect
    # _has_events first: one attribute instead of three collections on the common path.
    if getattr(dialect, "_has_events", True) and (
        dialect.dispatch.do_execute or dialect.dispatch.do_execute_no_params or dialect.dispatch.handle_error
    ):
        return Route.DRIVER_SQL
    return Route.BARE_CURSOR


_LISTENERS: dict[Any, Any] | None = event_registry._key_to_collection if AVAILABLE else None


def listeners_fingerprint() -> object:
    """What changes when any SQLAlchemy event listener is added or removed: the number of
    registered listeners and the newest one (``None`` when this SQLAlchemy was not
    checked: decide every time). Equal fingerprints mean no change, except when the
    newest listener was removed and added again as the last of as many removals as
    additions (:class:`~hermes_store.db.route_choice.RouteMemo` bounds that case)."""
    listeners = _LISTENERS
    if listeners is None:
        return None
    try:
        return len(listeners), next(reversed(listeners), None)
    except RuntimeError:  # changed by another thread while read: equal to nothing
        return object()


def watches_transaction_ends(connection: Connection) -> bool:
    """Whether a ``commit`` or ``rollback`` listener watches ``connection``: SQLite's
    driver-run write transactions (:func:`hermes_store.db.driver_transaction.begin_driver_transaction`)
    then open SQLAlchemy's bookkeeping transaction, which fires them."""
    if not AVAILABLE:
        return True
    dispatch: Any = connection.dispatch
    return bool(dispatch.commit or dispatch.rollback)


def raise_driver_error(
    connection: Connection, error: BaseException, statement: str, parameters: Any, cursor: Any
) -> NoReturn:
    """Raise ``error`` (raised by the driver running ``statement``) as SQLAlchemy would:
    wrapped in its ``DBAPIError`` family, the connection invalidated on a disconnect, the
    cursor closed. Exit exceptions (``KeyboardInterrupt``, cancellation) pass unwrapped."""
    connection._handle_dbapi_exception(error, statement, parameters, cursor, None)


def announce_copy(
    connection: Connection, cursor: Any, statement: str, *, rows_sent: int | None = None
) -> str:
    """Show a ``COPY … FROM STDIN`` statement, which SQLAlchemy cannot run itself, to what
    watches ``connection``: before it runs (``rows_sent=None``) the
    ``before_cursor_execute`` listeners (which may rewrite it: the statement to run is
    returned) and echo; after it, echo of the row count and ``after_cursor_execute``.
    There is no execution context: listeners get ``None`` for it. On a SQLAlchemy this
    module was not checked against, nothing is shown (the copy itself still runs)."""
    if not AVAILABLE:
        return statement
    dispatch: Any = connection.dispatch
    echo = bool(getattr(connection, "_echo", False))
    if rows_sent is None:
        for listener in dispatch.before_cursor_execute:
            statement, _ = listener(connection, cursor, statement, (), None, False)
        if echo:
            connection._log_info(statement)
        return statement
    if echo:
        connection._log_info("[COPY] %d rows", rows_sent)
    dispatch.after_cursor_execute(connection, cursor, statement, (), None, False)
    return statement
