"""Rewind (undo): taking a session back to before one of its user messages, keeping
the rewound rows on disk (``active = 0``, ``compacted = 0``) instead of deleting them.

Functions take the caller's connection and never commit.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, update

from hermes_store.db.execution import Bind, run
from hermes_store.domain import codec
from hermes_store.schema.models import Message, Session

PREVIEW_LENGTH = 80
"""Longest ``preview`` of :func:`recent_user_messages`; longer text is cut to 77 + ``...``."""


def rewind_to(db: Bind, session_id: str, target_id: int) -> dict[str, Any]:
    """Take ``session_id`` out of the live context from its user message ``target_id`` on.

    Every live message with ``id >= target_id`` becomes inactive (``compacted`` untouched)
    and the session's ``rewind_count`` goes up by one, even when nothing was live any
    more. Returns ``{"rewound_count", "target_message", "new_head_id"}``: how many rows
    left the live context, the target's full row (content decoded, ``tool_calls`` as
    stored) and the id of the last live message (``None``: none left).

    Raises ``ValueError``, changing nothing, when the target is not a message of the
    session or not a user message. The check runs in the caller's write transaction, so
    no other writer can change the target between the check and the rewind.
    """
    found = run(
        db, select(Message.__table__).where(Message.id == target_id, Message.session_id == session_id)
    ).first()
    if found is None:
        raise ValueError(f"message {target_id} not found in session {session_id}")
    target = dict(found._mapping)
    if target["role"] != "user":
        raise ValueError(
            f"rewind target must be a 'user' message (got role={target['role']!r}, id={target_id})"
        )
    target["content"] = codec.decode_content(target["content"])
    rewound = run(
        db,
        update(Message)
        .where(Message.session_id == session_id, Message.id >= target_id, Message.active == 1)
        .values(active=0),
    ).rowcount
    run(
        db,
        update(Session)
        .where(Session.id == session_id)
        .values(rewind_count=func.coalesce(Session.rewind_count, 0) + 1),
    )
    head = select(func.max(Message.id)).where(Message.session_id == session_id, Message.active == 1)
    return {"rewound_count": rewound, "target_message": target, "new_head_id": run(db, head).scalar()}


def restore(db: Bind, session_id: str, since_id: int) -> int:
    """Bring every inactive message of ``session_id`` with ``id >= since_id`` back into
    the live context; returns how many. Compaction-archived rows come back too (keeping
    ``compacted = 1``); the session's counters are left alone."""
    restored = run(
        db,
        update(Message)
        .where(Message.session_id == session_id, Message.id >= since_id, Message.active == 0)
        .values(active=1),
    )
    return int(restored.rowcount)


def recent_user_messages(
    db: Bind, session_id: str, limit: int | None, include_inactive: bool
) -> list[dict[str, Any]]:
    """The newest ``limit`` (``None``: all) user messages of ``session_id``, newest first,
    live ones only unless ``include_inactive``: ``{"id", "timestamp", "preview"}`` each."""
    query = select(Message.id, Message.timestamp, Message.content).where(
        Message.session_id == session_id, Message.role == "user"
    )
    if not include_inactive:
        query = query.where(Message.active == 1)
    query = query.order_by(Message.id.desc()).limit(limit)
    return [
        {"id": row.id, "timestamp": row.timestamp, "preview": preview(codec.decode_content(row.content))}
        for row in run(db, query)
    ]


def preview(content: object) -> str:
    """One line of a message's decoded content for a picker: whitespace runs collapsed,
    at most :data:`PREVIEW_LENGTH` characters. Multimodal content shows its text parts
    (or ``[multimodal content]`` without any); other non-text content shows nothing."""
    if isinstance(content, list):
        text = " ".join(codec.text_parts(content)) or codec.MULTIMODAL_PLACEHOLDER
    elif isinstance(content, str):
        text = content
    else:
        text = ""
    text = " ".join(text.split())
    if len(text) > PREVIEW_LENGTH:
        return text[: PREVIEW_LENGTH - 3] + "..."
    return text
