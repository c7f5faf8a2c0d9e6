"""Message rows: appending, rewriting, reading back and counting.

Functions take the caller's ORM session and never commit. Values arrive already
encoded (see :mod:`hermes_store.codec`); these functions only move rows. Reads order by
``id``, i.e. insertion order, which a clock jumping backwards cannot disturb.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Integer, bindparam, delete, func, insert, orm, select, update

from hermes_store.models import Message, Session
from hermes_store.repository.rows import fetch_dicts

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
)


@dataclass(frozen=True)
class NewMessage:
    """One message ready to store: content and JSON fields already encoded."""

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
    tool_call_units: int = 0
    """How much this message adds to the session's ``tool_call_count``."""

    def row(self, session_id: str, timestamp: float) -> dict[str, Any]:
        """The column values of this message for ``session_id`` at ``timestamp``."""
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
        }


# The hot path of every agent turn. Statements are built once, so each append only binds
# values; on SQLite they go straight to the driver cursor of the unit of work's connection
# (same transaction), which keeps an append within a few microseconds of hand-written
# sqlite3. Other backends take the same statements through SQLAlchemy Core.
_SESSIONS = Session.__table__.c
_INSERT_MESSAGE = insert(Message)
_BUMP_COUNTERS = (
    update(Session)
    .where(_SESSIONS.id == bindparam("bump_session_id"))
    .values(
        message_count=func.coalesce(_SESSIONS.message_count, 0) + 1,
        tool_call_count=func.coalesce(_SESSIONS.tool_call_count, 0)
        + bindparam("bump_tool_calls", type_=Integer()),
    )
)
_MESSAGE_FIELDS = tuple(column.name for column in Message.__table__.columns if column.name != "id")
_SQLITE_INSERT_MESSAGE = (
    f"INSERT INTO messages ({', '.join(_MESSAGE_FIELDS)}) VALUES ({', '.join('?' for _ in _MESSAGE_FIELDS)})"
)
_SQLITE_BUMP_COUNTERS = (
    "UPDATE sessions SET message_count = COALESCE(message_count, 0) + 1, "
    "tool_call_count = COALESCE(tool_call_count, 0) + ? WHERE id = ?"
)


def append(db: orm.Session, session_id: str, message: NewMessage) -> int:
    """Insert one message and bump the session's counters; returns the new id.

    Raises the driver's ``IntegrityError`` when the session does not exist.
    """
    connection = db.connection()
    row = message.row(session_id, time.time())
    if connection.dialect.name == "sqlite":
        cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(_SQLITE_INSERT_MESSAGE, [row[name] for name in _MESSAGE_FIELDS])
            new_id = cursor.lastrowid
            cursor.execute(_SQLITE_BUMP_COUNTERS, (message.tool_call_units, session_id))
        finally:
            cursor.close()
        return int(new_id)
    result = connection.execute(_INSERT_MESSAGE, row)
    new_id = result.inserted_primary_key[0]  # type: ignore[index]
    connection.execute(
        _BUMP_COUNTERS, {"bump_session_id": session_id, "bump_tool_calls": message.tool_call_units}
    )
    return int(new_id)


def replace_all(db: orm.Session, session_id: str, messages: Sequence[NewMessage]) -> None:
    """Replace a session's transcript; timestamps rise by 1 µs per message from now."""
    db.execute(delete(Message).where(Message.session_id == session_id))
    start = time.time()
    if messages:
        db.execute(
            insert(Message),
            [message.row(session_id, start + index * 1e-6) for index, message in enumerate(messages)],
        )
    db.execute(
        update(Session)
        .where(Session.id == session_id)
        .values(
            message_count=len(messages),
            tool_call_count=sum(message.tool_call_units for message in messages),
        )
    )


def clear(db: orm.Session, session_id: str) -> None:
    """Delete a session's messages and zero its message and tool-call counters."""
    db.execute(delete(Message).where(Message.session_id == session_id))
    db.execute(update(Session).where(Session.id == session_id).values(message_count=0, tool_call_count=0))


_MESSAGE_SELECT = ", ".join(column.name for column in Message.__table__.columns)
_CONVERSATION_SELECT = ", ".join(column.name for column in CONVERSATION_COLUMNS)


def rows_for(db: orm.Session, session_id: str) -> list[dict[str, Any]]:
    """All 15 columns of a session's messages as dicts, in insertion order."""
    return fetch_dicts(
        db,
        f"SELECT {_MESSAGE_SELECT} FROM messages WHERE session_id = :session_id ORDER BY id",
        {"session_id": session_id},
        content_keys=("content",),
    )


def rows_by_session(db: orm.Session, source: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every message (of sessions of ``source``, if given) grouped by session, in insertion
    order: one query for a whole export instead of one per session."""
    where = "WHERE session_id IN (SELECT id FROM sessions WHERE source = :source)" if source else ""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in fetch_dicts(
        db,
        f"SELECT {_MESSAGE_SELECT} FROM messages {where} ORDER BY id",
        {"source": source} if source else {},
        content_keys=("content",),
    ):
        grouped.setdefault(row["session_id"], []).append(row)
    return grouped


def conversation_rows(db: orm.Session, session_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The replay columns of the messages of ``session_ids`` as dicts, in insertion order."""
    return fetch_dicts(
        db,
        f"SELECT {_CONVERSATION_SELECT} FROM messages WHERE session_id IN :session_ids ORDER BY id",
        {"session_ids": list(session_ids)},
        content_keys=("content",),
    )


def count(db: orm.Session, session_id: str | None = None) -> int:
    """Number of messages, of one session when ``session_id`` is given (and non-empty)."""
    query = select(func.count()).select_from(Message)
    if session_id:
        query = query.where(Message.session_id == session_id)
    return int(db.execute(query).scalar_one())


def has_earlier(db: orm.Session, session_id: str, message_id: int) -> bool:
    """Whether session ``session_id`` holds a message stored before ``message_id``."""
    query = select(Message.id).where(Message.session_id == session_id, Message.id < message_id).limit(1)
    return db.execute(query).first() is not None
