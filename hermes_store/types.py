"""Column types that keep upstream's value encodings portable across backends.

SQLite stores whatever Python hands it in a TEXT column: strings with NUL bytes, numbers,
even ``bytes``. PostgreSQL's ``text`` cannot hold a NUL character, so the content
sentinel ``"\\x00json:"`` is stored there as ``"\\ue000json:"`` (a private-use character)
and mapped back on read; numbers are stored as their text, as SQLite's TEXT affinity
does. Content that PostgreSQL cannot hold at all (``bytes``, other NULs) is refused with
a clear error before anything is written.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import REAL, Double, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

SQLITE_CONTENT_SENTINEL = "\x00json:"
POSTGRES_CONTENT_SENTINEL = "\ue000json:"


def content_to_storage(value: Any, dialect_name: str) -> Any:
    """Prepare message content for a backend (identity on SQLite)."""
    if dialect_name != "postgresql" or value is None:
        return value
    if isinstance(value, bytes | bytearray):
        raise TypeError("bytes message content cannot be stored on PostgreSQL; decode it to str first")
    if isinstance(value, bool | int | float):
        return str(value)
    if isinstance(value, str):
        if value.startswith(SQLITE_CONTENT_SENTINEL):
            value = POSTGRES_CONTENT_SENTINEL + value[len(SQLITE_CONTENT_SENTINEL) :]
        if "\x00" in value:
            raise ValueError("PostgreSQL text cannot contain NUL characters; remove them first")
    return value


def content_from_storage(value: Any, dialect_name: str) -> Any:
    """Undo :func:`content_to_storage` on a value read back from a backend."""
    if (
        dialect_name == "postgresql"
        and isinstance(value, str)
        and value.startswith(POSTGRES_CONTENT_SENTINEL)
    ):
        return SQLITE_CONTENT_SENTINEL + value[len(POSTGRES_CONTENT_SENTINEL) :]
    return value


class MessageContent(TypeDecorator[Any]):
    """``messages.content``: TEXT holding upstream's encodings on every backend."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        """Map the value for ``dialect`` (see :func:`content_to_storage`)."""
        return content_to_storage(value, dialect.name)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        """Map a stored value back (see :func:`content_from_storage`)."""
        return content_from_storage(value, dialect.name)


class EpochSeconds(TypeDecorator[float]):
    """Epoch seconds: ``REAL`` on SQLite as upstream stores them, ``double precision`` elsewhere.

    PostgreSQL's ``real`` is only 4 bytes and would round timestamps to minutes. Chosen
    per dialect at run time so that no other dialect module is imported on start-up.
    """

    impl = REAL
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """``REAL`` on SQLite, ``DOUBLE PRECISION`` on other backends."""
        if dialect.name == "sqlite":
            return dialect.type_descriptor(REAL())
        return dialect.type_descriptor(Double())
