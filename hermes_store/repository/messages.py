"""Message rows: appending, rewriting, reading back and counting.

Functions take the caller's ORM session and never commit. Values arrive already
encoded (see :mod:`hermes_store.domain.codec`); these functions only move rows. Reads order by
``id``, i.e. insertion order, which a clock jumping backwards cannot disturb.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind, connection_of, driver_execute, fetch_dicts, fetch_tuples, run
from hermes_store.schema.models import Message, Session

CONVERSATION_COLUMNS = (
    Message.session_id,
    Message.role,
    Message.content,
    Message.tool_call_id,
    Message.tool_calls,
    Message.tool_name,
    Message.finish_reason,
    Message.reasoning,
    Message.reasoning_content,
    Message.reasoning_details,
    Message.codex_reasoning_items,
    Message.codex_message_items,
    Message.platform_message_id,
    Message.observed,
    Message.timestamp,
)


# Not frozen: a frozen dataclass sets each of its fields through object.__setattr__,
# which costs about as much as the rest of the append's Python work.
@dataclass(slots=True)
class NewMessage:
    """One message ready to store: content and JSON fields already encoded (treat it as
    read-only once built)."""

    role: str
    content: object = None
    tool_call_id: str | None = None
    tool_calls: str | None = None
    tool_name: str | None = None
    token_count: int | None = None
    finish_reason: str | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None
    reasoning_details: str | None = None
    codex_reasoning_items: str | None = None
    codex_message_items: str | None = None
    platform_message_id: str | None = None
    observed: int = 0
    tool_call_units: int = 0
    """How much this message adds to the session's ``tool_call_count``."""
    timestamp: float | None = None
    """The time the caller gave the message; ``None``: the time it is stored."""

    def row(self, session_id: str, timestamp: float) -> dict[str, Any]:
        """The column values of this message for ``session_id`` at ``timestamp`` (the
        caller resolves :attr:`timestamp` against its clock)."""
        return {
            "session_id": session_id,
            "role": self.role,
            "content": self.content,
            "tool_call_id": self.tool_call_id,
            "tool_calls": self.tool_calls,
            "tool_name": self.tool_name,
            "timestamp": timestamp,
            "token_count": self.token_count,
            "finish_reason": self.finish_reason,
            "reasoning": self.reasoning,
            "reasoning_content": self.reasoning_content,
            "reasoning_details": self.reasoning_details,
            "codex_reasoning_items": self.codex_reasoning_items,
            "codex_message_items": self.codex_message_items,
            "platform_message_id": self.platform_message_id,
            "observed": self.observed,
        }


# The hot path of every agent turn: two short statements run as driver SQL (see
# driver_execute), so an append costs little more than the same two statements in sqlite3.
# active/compacted are left to their defaults: a new message is always live.
_MESSAGE_FIELDS = tuple(
    column.name for column in Message.__table__.columns if column.name not in ("id", "active", "compacted")
)
_INSERT_MESSAGE = (
    f"INSERT INTO messages ({', '.join(_MESSAGE_FIELDS)}) "
    f"VALUES ({', '.join(':' + name for name in _MESSAGE_FIELDS)})"
)
_INSERT_MESSAGE_RETURNING_ID = _INSERT_MESSAGE + " RETURNING id"
# COALESCE: a row written by other code may hold NULL counters (upstream's columns only
# default to 0); NULL + 1 would stay NULL.
_BUMP_COUNTERS = (
    "UPDATE sessions SET message_count = COALESCE(message_count, 0) + :messages, "
    "tool_call_count = COALESCE(tool_call_count, 0) + :tool_calls WHERE id = :session_id"
)


def append(db: Bind, session_id: str, message: NewMessage) -> int:
    """Insert one message and bump the session's counters; returns the new id.

    Raises SQLAlchemy's ``IntegrityError`` when the session does not exist.
    """
    # connection_of(), inline: the facade's appends always pass the Connection.
    connection = db if type(db) is Connection else connection_of(db)
    new_id = _insert(connection, session_id, message)
    bump = {"session_id": session_id, "messages": 1, "tool_calls": message.tool_call_units}
    driver_execute(connection, _BUMP_COUNTERS, bump)
    return new_id


def stored(db: Bind, ids: Sequence[int]) -> bool:
    """Whether every message of ``ids`` is stored: how a write whose ``COMMIT`` got no answer
    learns whether it landed (its messages and their counters commit together)."""
    if not ids:
        return True
    found = fetch_tuples(db, "SELECT COUNT(*) FROM messages WHERE id IN :ids", {"ids": list(ids)})
    return int(found[0][0]) == len(set(ids))


def append_many(db: Bind, session_id: str, messages: Sequence[NewMessage]) -> list[int]:
    """Insert ``messages`` in order and bump the session's counters once; returns the new ids.

    The same rows and counters as :func:`append` called for each message, with one counter
    update for all of them. Raises SQLAlchemy's ``IntegrityError`` when the session does
    not exist.
    """
    connection = connection_of(db)
    new_ids = [_insert(connection, session_id, message) for message in messages]
    if new_ids:
        bump = {
            "session_id": session_id,
            "messages": len(new_ids),
            "tool_calls": sum(message.tool_call_units for message in messages),
        }
        driver_execute(connection, _BUMP_COUNTERS, bump)
    return new_ids


# Dialect class → (its backend's content storage mapping, whether the driver's lastrowid
# is the new id): looked up once, not per insert.
_insert_style: dict[type, tuple[Callable[[Any], Any] | None, bool]] = {}


def _insert(connection: Connection, session_id: str, message: NewMessage) -> int:
    stamp = message.timestamp
    row = message.row(session_id, time.time() if stamp is None else stamp)
    dialect = connection.dialect
    try:
        to_storage, returns_lastrowid = _insert_style[type(dialect)]
    except KeyError:
        # Driver SQL skips column types: content is mapped as the column type
        # (MessageContent) would. SQLAlchemy's own flag (DefaultDialect): the driver's
        # lastrowid is the new id (SQLite), so the INSERT needs no RETURNING; otherwise
        # (PostgreSQL) it does.
        to_storage = backend_for(connection).content_bind_processor()
        returns_lastrowid = bool(getattr(dialect, "postfetch_lastrowid", False))
        _insert_style[type(dialect)] = (to_storage, returns_lastrowid)
    if to_storage is not None:
        row["content"] = to_storage(row["content"])
    if returns_lastrowid:
        return driver_execute(connection, _INSERT_MESSAGE, row).lastrowid  # type: ignore[return-value]
    return int(driver_execute(connection, _INSERT_MESSAGE_RETURNING_ID, row).rows[0][0])


def replace_all(db: Bind, session_id: str, messages: Sequence[NewMessage], active_only: bool = False) -> None:
    """Replace a session's transcript with ``messages`` (see :func:`insert_rows`) and set
    its counters to theirs.

    Every row of the session is deleted first, archived and rewound ones included, unless
    ``active_only``: then only the live rows go and the inactive history stays. Raises
    SQLAlchemy's ``IntegrityError`` when ``messages`` is not empty and the session does
    not exist.
    """
    removed = delete(Message).where(Message.session_id == session_id)
    if active_only:
        removed = removed.where(Message.active == 1)
    run(db, removed)
    set_counters(db, session_id, *insert_rows(db, session_id, messages))


def insert_rows(db: Bind, session_id: str, messages: Sequence[NewMessage]) -> tuple[int, int]:
    """Insert ``messages`` as live rows of ``session_id``, in order; returns how many rows
    and how many tool calls they hold (the session's counters are the caller's).

    A message's own :attr:`~NewMessage.timestamp` is kept. The others get a running clock
    that starts at now and stays 1 µs past both the previous row and the last given time,
    so rows without a time sort after the rows they follow.
    """
    clock = time.time()
    rows = []
    for message in messages:
        stamp = clock if message.timestamp is None else message.timestamp
        rows.append(message.row(session_id, stamp))
        clock = max(clock, stamp) + 1e-6
    if rows:
        run(db, insert(Message), rows)
    return len(rows), sum(message.tool_call_units for message in messages)


def set_counters(db: Bind, session_id: str, message_count: int, tool_call_count: int) -> None:
    """Set a session's ``message_count`` and ``tool_call_count``."""
    run(
        db,
        update(Session)
        .where(Session.id == session_id)
        .values(message_count=message_count, tool_call_count=tool_call_count),
    )


def clear(db: Bind, session_id: str) -> None:
    """Delete every message of a session (archived and rewound ones too, as upstream
    Hermes does) and zero its message and tool-call counters."""
    run(db, delete(Message).where(Message.session_id == session_id))
    run(db, update(Session).where(Session.id == session_id).values(message_count=0, tool_call_count=0))


_MESSAGE_SELECT = ", ".join(column.name for column in Message.__table__.columns)
_CONVERSATION_SELECT = ", ".join(column.name for column in CONVERSATION_COLUMNS)


def _live_only(include_inactive: bool) -> str:
    return "" if include_inactive else " AND active = 1"


def rows_for(db: Bind, session_id: str, include_inactive: bool = False) -> list[dict[str, Any]]:
    """All 19 columns of a session's live messages (every message with
    ``include_inactive``) as dicts, in insertion order."""
    return fetch_dicts(
        db,
        f"SELECT {_MESSAGE_SELECT} FROM messages WHERE session_id = :session_id"
        f"{_live_only(include_inactive)} ORDER BY id",
        {"session_id": session_id},
        content_keys=("content",),
    )


def rows_by_session(db: Bind, source: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """The live messages of every session (of ``source``, if given) grouped by session, in
    insertion order: one query for a whole export instead of one per session."""
    where = "AND session_id IN (SELECT id FROM sessions WHERE source = :source)" if source else ""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in fetch_dicts(
        db,
        f"SELECT {_MESSAGE_SELECT} FROM messages WHERE active = 1 {where} ORDER BY id",
        {"source": source} if source else {},
        content_keys=("content",),
    ):
        grouped.setdefault(row["session_id"], []).append(row)
    return grouped


def conversation_rows(
    db: Bind, session_ids: Sequence[str], include_inactive: bool = False
) -> list[dict[str, Any]]:
    """The replay columns of the live messages (all, with ``include_inactive``) of
    ``session_ids`` as dicts, in insertion order."""
    backend = backend_for(db)
    return fetch_dicts(
        db,
        f"SELECT {_CONVERSATION_SELECT} FROM messages "
        f"WHERE {backend.in_list('session_id', 'session_ids')}{_live_only(include_inactive)} ORDER BY id",
        {"session_ids": backend.list_value(session_ids)},
        content_keys=("content",),
    )


def count(db: Bind, session_id: str | None = None) -> int:
    """Number of messages, of one session when ``session_id`` is given (and non-empty)."""
    query = select(func.count()).select_from(Message)
    if session_id:
        query = query.where(Message.session_id == session_id)
    return int(run(db, query).scalar_one())


def has_earlier(db: Bind, session_id: str, message_id: int) -> bool:
    """Whether session ``session_id`` holds a message stored before ``message_id``."""
    query = select(Message.id).where(Message.session_id == session_id, Message.id < message_id).limit(1)
    return run(db, query).first() is not None
