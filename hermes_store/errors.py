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


class UnsafePath(StoreError):
    """The database path is a symbolic link or otherwise unsafe to open for writing."""
