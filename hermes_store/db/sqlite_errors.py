"""Classifying database errors by SQLite's error code, not by message text.

Messages change between SQLite releases and locales; ``sqlite_errorname`` does not.
"""

from __future__ import annotations

import sqlite3
from typing import NoReturn

from sqlalchemy import exc as sa_exc

from hermes_store.db.server_errors import translate_server_error
from hermes_store.errors import (
    AuthenticationFailed,
    CorruptDatabase,
    ReadOnlyStore,
    SearchUnavailable,
    ServerUnavailable,
    StorageFull,
    StoreError,
)

# SQLite's primary result codes, for drivers that report only the number.
_LOCK_CODES = {5, 6}


def sqlite_error_name(error: BaseException) -> str:
    """SQLite's symbolic error name (``SQLITE_BUSY_SNAPSHOT`` …) of ``error``, or ``""``."""
    original = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    if isinstance(original, sqlite3.Error):
        return str(getattr(original, "sqlite_errorname", "") or "")
    return ""


def is_lock_error(error: BaseException) -> bool:
    """True when ``error`` means another connection holds the lock (busy or locked)."""
    original = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    if not isinstance(original, sqlite3.OperationalError):
        return False
    name = sqlite_error_name(original)
    if name:
        return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))
    code = getattr(original, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in _LOCK_CODES


def translate(error: BaseException, operation: str) -> BaseException:
    """Map a driver error to the ``StoreError`` subclass that tells the user what to do.

    Errors without a meaning of their own are returned unchanged.
    """
    # A connection that could not be made (refused, bad credentials) first; then the
    # server's own failures (dropped connections, timeouts) by SQLSTATE.
    server = connection_failure(error) or translate_server_error(error, operation)
    if server is not None:
        return server
    name = sqlite_error_name(error)
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")):
        return ReadOnlyStore(
            f"cannot write the database while {operation}: the file or its directory is "
            f"read-only or not accessible ({name}); fix the permissions or open a writable copy"
        )
    if name.startswith("SQLITE_FULL") or name == "SQLITE_IOERR_SHMSIZE":
        return StorageFull(
            f"the disk holding the database is full while {operation} ({name}); free space "
            "and retry — nothing already committed was lost"
        )
    # Python's sqlite3 (not SQLite) reports text it cannot decode; in a store that only
    # ever writes UTF-8 that means damaged pages.
    # No command repairs these (doctor and backup fail on them the same way), so the
    # advice is the one thing that works: check the path, or restore a copy.
    if name == "SQLITE_NOTADB":
        return CorruptDatabase(
            f"the file is not a SQLite database while {operation} ({name}); check the path, "
            "or restore the store from a backup"
        )
    if name.startswith("SQLITE_CORRUPT") or _is_undecodable_text(error):
        return CorruptDatabase(
            f"the database file is damaged while {operation} ({name or 'undecodable text'}); "
            "restore the store from a backup"
        )
    if name.startswith("SQLITE_IOERR"):
        return StoreError(f"I/O error while {operation} ({name}): {error}")
    if is_missing_search_capability(error):
        return SearchUnavailable(
            f"this SQLite build cannot run the full-text index while {operation} ({_message(error)}): "
            "hermes_store needs SQLite ≥ 3.34 with FTS5 and the trigram tokenizer; use a Python "
            "linked against such a SQLite (e.g. python.org or distro builds) — stored data is intact"
        )
    return error


def raise_translated(error: BaseException, operation: str) -> NoReturn:
    """Raise what :func:`translate` makes of ``error``, or ``error`` itself, unchanged.

    Call it inside the ``except`` block that caught ``error`` so the traceback is kept.
    """
    translated = translate(error, operation)
    if translated is error:
        raise error
    raise translated from error


def _is_undecodable_text(error: BaseException) -> bool:
    return "Could not decode to UTF-8" in _message(error)


def _message(error: BaseException) -> str:
    original = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    return str(original)


def is_missing_search_capability(error: BaseException) -> bool:
    """True when SQLite lacks FTS5 or a tokenizer a search table was built with.

    SQLite reports these as a generic SQLITE_ERROR, so the message is the only signal.
    """
    text = _message(error)
    return "no such module: fts5" in text or "no such tokenizer" in text


_FTS_QUERY_REJECTIONS = ("fts5:", "unknown special query", "no such column")


def is_fts_query_rejection(error: BaseException) -> bool:
    """True when FTS5 refused the query text itself (syntax), not the database.

    SQLite reports these as a generic SQLITE_ERROR, so the message is the only signal.
    """
    return _message(error).startswith(_FTS_QUERY_REJECTIONS)


# libpq reports a failed connection as text only (no SQLSTATE: the session never began).
_AUTHENTICATION_MARKERS = ("authentication failed", "no password supplied", 'role "', "password is required")


def connection_failure(error: BaseException) -> StoreError | None:
    """The store error for a server connection that could not be made, else ``None``."""
    original = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    if not _is_driver_operational_error(original) or getattr(original, "sqlstate", None):
        return None
    text = _message(error).strip()
    detail = " ".join(text.split())
    if any(marker in text for marker in _AUTHENTICATION_MARKERS):
        return AuthenticationFailed(
            f"the PostgreSQL server refused the credentials: {detail}; check the user and password in the URL"
        )
    return ServerUnavailable(
        f"cannot reach the PostgreSQL server: {detail}; check that it is running and that "
        "the host, port and database in the URL are right"
    )


def _is_driver_operational_error(error: BaseException | None) -> bool:
    return type(error).__module__.startswith("psycopg") and any(
        kind.__name__ == "OperationalError" for kind in type(error).__mro__
    )


# PostgreSQL SQLSTATEs worth retrying whole: serialization failure, deadlock.
_RETRYABLE_SQLSTATES = {"40001", "40P01"}


def is_retryable_conflict(error: BaseException) -> bool:
    """True when retrying the whole transaction may succeed (lock, busy, serialization)."""
    if is_lock_error(error):
        return True
    original = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    return getattr(original, "sqlstate", None) in _RETRYABLE_SQLSTATES
