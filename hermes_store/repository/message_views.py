"""Views of a session around one of its messages, for scrolling through a transcript
and for showing a search hit with the session's opening and closing.

These views read every stored row, live or not: an archived or rewound message is still
part of what was said. Functions take the caller's connection and never commit; each
view's statements should run in one snapshot.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Select, select

from hermes_store.db.execution import Bind, run
from hermes_store.domain import codec
from hermes_store.repository.conversation import decoded
from hermes_store.schema.models import Message

# Stored forms of content that decodes to nothing: such a message has no text to show
# as the opening or closing of a session.
_EMPTY_CONTENT = ("", codec.encode_content([]), codec.encode_content({}))


def _rows(db: Bind, query: Select[Any]) -> list[dict[str, Any]]:
    return [dict(row._mapping) for row in run(db, query)]


def _of_session(session_id: str) -> Select[Any]:
    return select(Message.__table__).where(Message.session_id == session_id)


def around(db: Bind, session_id: str, anchor_id: int, window: int) -> dict[str, Any]:
    """Up to ``window`` messages either side of ``anchor_id`` and the anchor itself, in id
    order, with ``content`` and ``tool_calls`` decoded: ``{"window", "messages_before",
    "messages_after"}``, the last two counting the rows returned on each side (fewer than
    ``window`` at an end of the session). An anchor that is not a message of
    ``session_id`` gives an empty window and zero counts."""
    anchor = select(Message.id).where(Message.id == anchor_id, Message.session_id == session_id)
    if run(db, anchor.limit(1)).first() is None:
        return {"window": [], "messages_before": 0, "messages_after": 0}
    up_to_anchor = _rows(
        db,
        _of_session(session_id).where(Message.id <= anchor_id).order_by(Message.id.desc()).limit(window + 1),
    )
    after = _rows(
        db, _of_session(session_id).where(Message.id > anchor_id).order_by(Message.id).limit(window)
    )
    return {
        "window": decoded(up_to_anchor[::-1] + after),
        "messages_before": len(up_to_anchor) - 1,
        "messages_after": len(after),
    }


def bookends(
    db: Bind, session_id: str, before_id: int, after_id: int, count: int, roles: Collection[str] | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The first ``count`` messages of ``session_id`` before ``before_id`` and the last
    ``count`` after ``after_id`` (both in id order, decoded), keeping only messages with
    content and, unless ``roles`` is ``None``, of those roles."""
    with_text = _of_session(session_id).where(
        Message.content.is_not(None), Message.content.not_in(_EMPTY_CONTENT)
    )
    if roles is not None:
        with_text = with_text.where(Message.role.in_(list(roles)))
    start = _rows(db, with_text.where(Message.id < before_id).order_by(Message.id).limit(count))
    end = _rows(db, with_text.where(Message.id > after_id).order_by(Message.id.desc()).limit(count))
    return decoded(start), decoded(end[::-1])


def has_platform_message_id(db: Bind, session_id: str, platform_message_id: str) -> bool:
    """Whether ``session_id`` holds a message (live or not) with that platform id."""
    probe = select(Message.id).where(
        Message.session_id == session_id, Message.platform_message_id == platform_message_id
    )
    return run(db, probe.limit(1)).first() is not None
