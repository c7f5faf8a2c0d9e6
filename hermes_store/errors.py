"""The exceptions hermes_store raises on purpose.

Every error the store raises for a reason it understands is a ``StoreError``; each
subclass says what went wrong and what the user can do about it. Programming errors in
the caller's input stay ``ValueError``/``TypeError`` as upstream Hermes raised them.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class of every error hermes_store raises deliberately."""


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


class UnsafePath(StoreError):
    """The database path is a symbolic link or otherwise unsafe to open for writing."""


class ServerUnavailable(StoreError):
    """The database server could not be reached, or dropped the connection.

    Writes that failed before their commit was sent are retried (reconnecting) for a
    while before this is raised, so nothing is half-applied; ``outcome_unknown`` is true
    when the connection broke during ``COMMIT`` itself, where the server may or may not
    have committed the write.
    """

    def __init__(self, message: str, *, outcome_unknown: bool = False) -> None:
        self.outcome_unknown = outcome_unknown
        super().__init__(message)


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
