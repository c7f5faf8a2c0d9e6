"""Comparing two stores row by row, column by column, in constant memory.

Both stores are read as streams in the same key order (:func:`stream_rows`), so memory
holds one page of rows per side, whatever the size of the store:

* sessions and messages: one digest per session, over every column of the session row
  and of each of its messages in id order (:func:`session_digests`). The two digest
  streams are merged by session id; at the first session whose digests differ, that one
  session is read again on both sides and compared column by column, so the difference is
  named: table, key, column and both values;
* the other tables (``state_meta``, ``compression_locks``, the Telegram topic tables)
  are merged row by row directly (:func:`first_row_difference`).

Values are compared as the backends store them once read back: floats as 8-byte floats
(PostgreSQL ``double precision`` and SQLite ``REAL`` hold the same values), integers as
integers, text as text, and message content decoded (each backend marks JSON content
with its own sentinel).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from itertools import groupby
from typing import Any, TypeVar

from sqlalchemy import Integer, collate
from sqlalchemy.engine import Engine

from hermes_store.admin.copy_source import TableReader, columns_of, stream_rows
from hermes_store.db.column_types import Float8, MessageContent
from hermes_store.domain.codec import decode_content

K = TypeVar("K")
A = TypeVar("A")
B = TypeVar("B")
Normalizer = Callable[[Any], Any]
_SHOWN = 80
"""Characters of a value shown in a difference."""


def _as_text(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return "bytes:" + value.hex()
    return str(value)


def _as_integer(value: Any) -> Any:
    if value is None or isinstance(value, int):
        return None if value is None else int(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return repr(value)
    return int(number) if number.is_integer() else number


def _as_float(value: Any) -> Any:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return repr(value)


def _as_content(value: Any) -> Any:
    decoded = decode_content(value)
    if isinstance(decoded, str) or decoded is None:
        return decoded
    return "json:" + json.dumps(decoded, sort_keys=True, ensure_ascii=False, default=repr)


def normalizers(reader: TableReader) -> list[Normalizer]:
    """One value mapping per model column: the comparable form of what the store holds."""
    chosen: list[Normalizer] = []
    for column in reader.table.columns:
        if isinstance(column.type, MessageContent):
            chosen.append(_as_content)
        elif isinstance(column.type, Float8):
            chosen.append(_as_float)
        elif isinstance(column.type, Integer):
            chosen.append(_as_integer)
        else:
            chosen.append(_as_text)
    return chosen


def normalized_rows(engine: Engine, reader: TableReader, **query: Any) -> Iterator[tuple[Any, ...]]:
    """:func:`stream_rows`, every value in its comparable form."""
    mapping = normalizers(reader)
    for row in stream_rows(engine, reader, **query):
        yield tuple(normalize(value) for normalize, value in zip(mapping, row, strict=True))


def merge_by_key(
    left: Iterable[tuple[K, A]], right: Iterable[tuple[K, B]]
) -> Iterator[tuple[K, A | None, B | None]]:
    """Two streams sorted by key, side by side: ``(key, left item or None, right item or None)``."""
    end = object()
    lefts, rights = iter(left), iter(right)
    a: Any = next(lefts, end)
    b: Any = next(rights, end)
    while a is not end or b is not end:
        if b is end or (a is not end and a[0] < b[0]):
            yield a[0], a[1], None
            a = next(lefts, end)
        elif a is end or b[0] < a[0]:
            yield b[0], None, b[1]
            b = next(rights, end)
        else:
            yield a[0], a[1], b[1]
            a, b = next(lefts, end), next(rights, end)


def _digest(rows: Iterable[tuple[Any, ...]]) -> bytes:
    # repr() of a normalized row (None, str, int, float) is exact — a float's repr reads
    # back as the same float — and escapes what UTF-8 cannot encode, such as a lone
    # surrogate; it costs a third of json.dumps, and a copy digests every row twice.
    digest = hashlib.blake2b(digest_size=20)
    for row in rows:
        digest.update(repr(row).encode())
        digest.update(b"\n")
    return digest.digest()


def session_digests(engine: Engine, readers: dict[str, TableReader]) -> Iterator[tuple[str, bytes]]:
    """``(session id, digest)`` for every session in id order: the digest covers every
    column of the session row and of its messages, in id order. Messages naming a
    session the store lacks get a digest of their own under that id."""
    sessions, messages = readers["sessions"], readers["messages"]
    by_id = messages.key_columns(engine)
    session_key = messages.table.c.session_id
    if engine.dialect.name == "postgresql":
        ordered_by = [collate(session_key, "C"), *by_id]
    else:
        ordered_by = [session_key, *by_id]
    position = columns_of(messages.model).index("session_id")
    rows = ((row[0], _digest([row])) for row in normalized_rows(engine, sessions))
    groups = (
        (key, _digest(group))
        for key, group in groupby(
            normalized_rows(engine, messages, order_by=ordered_by), lambda r: r[position]
        )
    )
    for key, own, of_messages in merge_by_key(rows, groups):
        yield key, (own or b"no session row") + (of_messages or b"no messages")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def first_row_difference(
    table: str,
    reader: TableReader,
    source_rows: Iterable[tuple[Any, ...]],
    target_rows: Iterable[tuple[Any, ...]],
    key_width: int = 1,
) -> str | None:
    """The first difference between two key-ordered streams of normalized rows of
    ``table``, in words (table, key, column, both values), or ``None``."""
    names = columns_of(reader.model)

    def keyed(rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, tuple[Any, ...]]]:
        return ((row[0] if key_width == 1 else row[:key_width], row) for row in rows)

    for key, expected, found in merge_by_key(keyed(source_rows), keyed(target_rows)):
        if found is None:
            return f"{table} {key!r} is missing from the target"
        if expected is None:
            return f"{table} {key!r} is in the target but not in the source"
        for name, wanted, held in zip(names, expected, found, strict=True):
            if wanted != held:
                return f"{table} {key!r} column {name}: source {_shown(wanted)}, target {_shown(held)}"
    return None
