"""In-place compaction: a session's live messages are archived and replaced by a shorter
list under the same session id.

An archived row keeps its content but leaves the live context (``active = 0``) and is
marked ``compacted = 1``, which keeps it in default search; a rewound row (``active = 0``,
``compacted = 0``) is left as it is. Functions take the caller's connection and never commit.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, update

from hermes_store.db.execution import Bind, run
from hermes_store.repository import messages
from hermes_store.schema.models import Message


def archive_and_compact(db: Bind, session_id: str, compacted: Sequence[messages.NewMessage]) -> int:
    """Archive every live message of ``session_id``, store ``compacted`` as its new live
    messages and set the session's counters to theirs; returns how many were stored.

    Raises SQLAlchemy's ``IntegrityError`` when ``compacted`` is not empty and the session
    does not exist (the caller's transaction then rolls back the archiving too).
    """
    run(
        db,
        update(Message)
        .where(Message.session_id == session_id, Message.active == 1)
        .values(active=0, compacted=1),
    )
    inserted, tool_calls = messages.insert_rows(db, session_id, compacted)
    messages.set_counters(db, session_id, inserted, tool_calls)
    return inserted


def has_inactive(db: Bind, session_id: str) -> bool:
    """Whether ``session_id`` holds a message out of the live context (archived or rewound)."""
    probe = select(Message.id).where(Message.session_id == session_id, Message.active == 0).limit(1)
    return run(db, probe).first() is not None
