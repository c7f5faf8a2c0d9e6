"""Classifying database errors by SQLite's error code, not by message text.

Messages change between SQLite releases and locales; ``sqlite_errorname`` does not.
"""

from __future__ import annotations

import sqlite3
from typing import NoReturn

from sqlalchemy import exc as sa_exc

from hermes_store.errors import (
    CorruptDatabase,
    ReadOnlyStore,
    SearchUnavailable,
    StorageFull,
    StoreError,
)
from hermes_store.errors_server import translate_server_error

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
    server = translate_server_error(error, operation)
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
    if name.startswith("SQLITE_CORRUPT") or name == "SQLITE_NOTADB" or _is_undecodable_text(error):
        return CorruptDatabase(
            f"the database file is damaged or not a SQLite database while {operation} ({name}); "
            "restore a backup or run 'hermes-store doctor'"
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


# PostgreSQL SQLSTATEs worth retrying whole: serialization failure, deadlock.
_RETRYABLE_SQLSTATES = {"40001", "40P01"}


def is_retryable_conflict(error: BaseException) -> bool:
    """True when retrying the whole transaction may succeed (lock, busy, serialization)."""
    if is_lock_error(error):
        return True
    original = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    return getattr(original, "sqlstate", None) in _RETRYABLE_SQLSTATES
