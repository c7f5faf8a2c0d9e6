"""Gateway routing peers on session rows: who a session talks to, and finding it again.

The gateway keeps its routing index (which session serves which chat) in a file that can
be lost; the peer columns on ``sessions`` (``session_key``, ``source``, ``user_id``,
``chat_id``, ``chat_type``, ``thread_id``) let it be rebuilt from the store.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, exists, func, or_, select, update

from hermes_store.db.execution import Bind, run
from hermes_store.schema.models import Message, Session


def record_peer(db: Bind, session_id: str, peer: dict[str, Any]) -> None:
    """Overwrite the session's peer columns with ``peer`` (``None`` values clear them).

    ``peer`` maps column names (``session_key``, ``source``, ``user_id``, ``chat_id``,
    ``chat_type``, ``thread_id``) to their new values. A missing session changes nothing.
    """
    run(db, update(Session).where(Session.id == session_id).values(**peer))


def _recoverable() -> ColumnElement[bool]:
    """Still live, or ended only by the gateway's own agent shutdown; and not empty.

    A session the gateway ended with ``agent_close`` was not finished by the user, so it
    may be picked up again; any other end (a new conversation, a compression split) is a
    real boundary. A session without messages has nothing to resume.
    """
    has_message = exists().where(Message.session_id == Session.id)
    return or_(Session.ended_at.is_(None), Session.end_reason == "agent_close") & or_(
        func.coalesce(Session.message_count, 0) > 0, has_message
    )


def _latest(db: Bind, *conditions: ColumnElement[bool]) -> dict[str, Any] | None:
    statement = (
        select(*Session.__table__.columns)
        .where(*conditions, _recoverable())
        .order_by(Session.started_at.desc())
        .limit(1)
    )
    row = run(db, statement).mappings().first()
    return None if row is None else dict(row)


def latest_for_key(db: Bind, source: str, session_key: str) -> dict[str, Any] | None:
    """The newest recoverable session of ``source`` recorded under ``session_key``."""
    return _latest(db, Session.session_key == session_key, Session.source == source)


def latest_for_peer(
    db: Bind,
    source: str,
    user_id: str | None,
    chat_id: str | None,
    chat_type: str | None,
    thread_id: str | None,
) -> dict[str, Any] | None:
    """The newest recoverable session of ``source`` whose whole peer matches, NULL and
    ``''`` counting as the same value (so one chat, thread or user never stands in for
    another)."""

    def same(column: Any, value: str | None) -> ColumnElement[bool]:
        return func.coalesce(column, "") == ("" if value is None else value)

    return _latest(
        db,
        Session.source == source,
        same(Session.user_id, user_id),
        same(Session.chat_id, chat_id),
        same(Session.chat_type, chat_type),
        same(Session.thread_id, thread_id),
    )
