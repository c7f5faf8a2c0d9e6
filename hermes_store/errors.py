"""The exceptions hermes_store raises on purpose.

Every error the store raises for a reason it understands is a ``StoreError``; each
subclass says what went wrong and what the user can do about it. Programming errors in
the caller's input stay ``ValueError``/``TypeError`` as upstream Hermes raised them.
"""

from __future__ import annotations

from typing import Any


class StoreError(Exception):
    """Base class of every error hermes_store raises deliberately."""


class StoreClosed(RuntimeError):
    """The store (or a unit of work kept from it) was used after ``close()``.

    A ``RuntimeError``, as upstream Hermes raises for a closed store, and deliberately not
    a ``StoreError``: the methods that answer a failed read with a default, as upstream's
    do, must not answer for a store that is gone.
    """

    def __init__(self) -> None:
        super().__init__("this SessionDB is closed: open a new SessionDB to use the store again")


class WriteConflict(StoreError):
    """A write could not get the database lock within the retry budget."""

    def __init__(self, operation: str, attempts: int, cause: BaseException | None = None) -> None:
        self.operation = operation
        self.attempts = attempts
        super().__init__(
            f"could not write ({operation}): the database stayed locked by another writer "
            f"through {attempts} attempts; another process holds a long write transaction — "
            f"retry later or find the process keeping the lock" + (f" ({cause})" if cause else "")
        )


class NestedWrite(StoreError):
    """A write was started inside another write on the same thread.

    The outer write holds the store's writer lock until it returns, so the inner one
    could only wait forever; it is refused at once instead.
    """

    def __init__(self, operation: str) -> None:
        self.operation = operation
        super().__init__(
            f"cannot start a write ({operation}) inside another write on the same thread: the "
            "outer write holds the writer lock until it returns, so this one would wait forever; "
            "do the inner work with the session the outer write was given (repository functions)"
        )


class ReadOnlyStore(StoreError):
    """The database file or its directory cannot be written."""


class StorageFull(StoreError):
    """The disk or file system holding the database is full."""


class CorruptDatabase(StoreError):
    """The file is not a SQLite database, or its pages are damaged."""


class SearchUnavailable(StoreError):
    """This SQLite build lacks FTS5 or the trigram tokenizer the store needs."""


class SchemaError(StoreError):
    """The database schema cannot be brought to or used at the expected revision."""


class SchemaBehind(SchemaError):
    """A database server's schema is older than this release can run on.

    Opening never migrates a server database that has a schema (a deploy step does):
    run ``hermes-store --url URL upgrade`` (or ``alembic upgrade head``), or open with
    ``auto_upgrade=True`` in development.
    """


class UnsafePath(StoreError):
    """The database path is a symbolic link or otherwise unsafe to open for writing."""


class DatabaseNotFound(StoreError):
    """There is no database at the path, and opening it was not meant to create one."""


class UnsupportedURL(StoreError):
    """The URL cannot be parsed, or names a database hermes_store does not run on.

    hermes_store opens SQLite files (``sqlite:///PATH`` or a plain path) and PostgreSQL
    servers (``postgresql+psycopg://USER@HOST/DB``).
    """


class MissingDriver(StoreError):
    """The Python driver the URL needs is not installed; the message names what to install."""


class ServerUnavailable(StoreError):
    """The database server cannot be reached, or dropped the connection.

    Refused, unknown host, timeout, no such database, a restart, a killed backend. Writes
    that failed before their commit was sent are retried (reconnecting) for a while before
    this is raised, so nothing is half-applied; ``outcome_unknown`` is true when the
    connection broke during ``COMMIT`` itself, where the server may or may not have
    committed the write. The store's own appends settle that before they raise: they look
    for the message on a fresh connection, return its id when it landed and write it again
    when it did not (``docs/postgresql.md``, "Failover").
    """

    def __init__(self, message: str, *, outcome_unknown: bool = False) -> None:
        self.outcome_unknown = outcome_unknown
        self.uncommitted_result: Any = None
        """What the write returned inside the transaction whose ``COMMIT`` got no answer."""
        super().__init__(message)


class AuthenticationFailed(StoreError):
    """The server refused the credentials (wrong password, unknown role)."""


class InsufficientPrivilege(StoreError):
    """The server refused a statement because the role lacks a privilege (SQLSTATE 42501):
    creating the schema in an empty database without ``CREATE`` on its schema, or
    reading or writing a table the role was not granted."""


class StoreTimeout(StoreError):
    """A server-side timeout ended the statement; ``setting`` names which one.

    ``setting`` is ``"lock_timeout"`` (a lock was held by someone else for too long) or
    ``"statement_timeout"`` (the statement itself ran too long). The transaction was
    rolled back whole.
    """

    def __init__(self, setting: str, operation: str, detail: str) -> None:
        self.setting = setting
        self.operation = operation
        super().__init__(
            f"{setting} exceeded while {operation}: {detail}; the transaction was rolled back — "
            f"retry, or raise {setting} (docs/postgresql.md)"
        )


class CopyRefused(StoreError):
    """``hermes-store copy`` will not run: the target already holds sessions or messages;
    it holds an interrupted copy and neither ``--resume`` nor ``--restart`` was given; the
    source changed since the interrupted copy began (only ``--restart`` goes on); or the
    source cannot be read as it is (newer than this release, duplicate titles)."""


class CopyUnfinished(StoreError):
    """The database is the target of a ``hermes-store copy`` that has not finished: it
    holds part of the source only, so it is not opened as a store. The message names the
    copy command that finishes it (``--resume``)."""


class CopyMismatch(StoreError):
    """A copy (or ``hermes-store verify``) found the target unlike the source: the message
    names the first difference (a table, key and column, or a missing or different index,
    constraint or trigger). After a copy the source was probably written to meanwhile."""


class UnsupportedHermes(StoreError):
    """The Hermes Agent release running the drop-in is not one it serves; the message names
    both versions and how to go on (Hermes' own ``hermes_state.py``, or the override)."""


class DropInLacks(StoreError):
    """Hermes called a method or passed a keyword the drop-in does not have: the message
    names it and the Hermes releases the drop-in serves."""


class DropInLacksMethod(DropInLacks, AttributeError):
    """A ``SessionDB`` method the drop-in does not have. An ``AttributeError``, so
    ``hasattr()`` and ``getattr(db, name, default)`` (how Hermes probes optional methods)
    still answer."""


class DropInLacksKeyword(DropInLacks, TypeError):
    """A keyword argument (or argument count) a drop-in method does not accept."""
