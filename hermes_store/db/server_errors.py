"""Classifying a database server's errors (PostgreSQL) by SQLSTATE, not message text.

Three families matter to a store on a server:

* the server is unreachable or dropped the connection (restart, ``pg_terminate_backend``,
  network cut): SQLSTATE class ``08``, ``57P01``–``57P03``, or a driver error without a
  SQLSTATE that SQLAlchemy recognised as a disconnect or raised while connecting;
* ``lock_timeout`` (``55P03``) and ``statement_timeout`` (``57014``): typed, naming the
  setting;
* a privilege the role lacks (``42501``): typed, with the server's one-line reason;
* everything else: left to :mod:`hermes_store.db.sqlite_errors`.
"""

from __future__ import annotations

from sqlalchemy import exc as sa_exc

from hermes_store.errors import InsufficientPrivilege, ServerUnavailable, StoreTimeout

_UNREACHABLE_SQLSTATES = {"57P01", "57P02", "57P03"}  # admin/crash shutdown, cannot connect now
_TIMEOUTS = {"55P03": "lock_timeout", "57014": "statement_timeout"}
_INSUFFICIENT_PRIVILEGE = "42501"


def _sqlstate(error: BaseException) -> str | None:
    original = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    state = getattr(original, "sqlstate", None)
    return str(state) if state else None


_SERVER_DRIVER_MODULES = {"psycopg", "psycopg2", "asyncpg"}
_ADAPTED_DRIVER_MODULES = {"sqlalchemy.dialects.postgresql.asyncpg"}
"""Where SQLAlchemy's asyncpg dialect defines the DBAPI errors it wraps asyncpg's in
(they carry its ``sqlstate``): a server's errors on that driver too."""


def _is_server_driver_error(error: BaseException) -> bool:
    original = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    module = type(original).__module__
    return module.split(".")[0] in _SERVER_DRIVER_MODULES or module in _ADAPTED_DRIVER_MODULES


def is_server_unreachable(error: BaseException) -> bool:
    """True when ``error`` means the server cannot be reached or dropped the connection."""
    if not _is_server_driver_error(error):
        return False
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        return True
    state = _sqlstate(error)
    if state is None:
        # psycopg raises OperationalError without a SQLSTATE when connecting fails or
        # the socket closes under a statement.
        original = error.orig if isinstance(error, sa_exc.DBAPIError) else error
        return type(original).__name__ == "OperationalError"
    return state.startswith("08") or state in _UNREACHABLE_SQLSTATES


def is_lock_timeout(error: BaseException) -> bool:
    """True when ``error`` is the server giving up a lock wait (``lock_timeout``, 55P03)."""
    return _is_server_driver_error(error) and _sqlstate(error) == "55P03"


def violated_unique_index(error: BaseException) -> str | None:
    """The unique index (or constraint) a server refused a write for (23505), else ``None``."""
    if not _is_server_driver_error(error) or _sqlstate(error) != "23505":
        return None
    original = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    name = getattr(getattr(original, "diag", None), "constraint_name", None)
    return str(name) if name else None


def translate_server_error(error: BaseException, operation: str) -> BaseException | None:
    """The ``StoreError`` a server error stands for, or ``None`` when it has none."""
    if not _is_server_driver_error(error):
        return None
    setting = _TIMEOUTS.get(_sqlstate(error) or "")
    if setting is not None:
        original = error.orig if isinstance(error, sa_exc.DBAPIError) else error
        detail = str(original).strip().splitlines()[0] if str(original).strip() else setting
        return StoreTimeout(setting, operation, detail)
    if _sqlstate(error) == _INSUFFICIENT_PRIVILEGE:
        return InsufficientPrivilege(
            f"the database role lacks a privilege while {operation} ({first_line(error)}); "
            "have the database owner grant it (an empty database needs CREATE on its schema "
            "for the first open), or connect as a role that has it"
        )
    if is_server_unreachable(error):
        return ServerUnavailable(
            f"the database server is unreachable or dropped the connection while {operation}; "
            f"this call was not applied — retry once the server is back ({first_line(error)})"
        )
    return None


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message (the driver's, for a wrapped one), else its class name."""
    original = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    text = str(original).strip()
    return text.splitlines()[0] if text else type(original).__name__
