"""Rewind (``/undo``): taking a session back to before one of its user messages without
deleting anything, and bringing rewound messages back."""

from __future__ import annotations

from typing import Any, ClassVar

from hermes_store.api.features.base import FacadeBase
from hermes_store.domain.validation import require_int
from hermes_store.repository import rewind


class RewindMethods(FacadeBase):
    """``rewind_to_message``, ``restore_rewound`` and ``list_recent_user_messages``."""

    _ASYNC_READS: ClassVar[tuple[str, ...]] = ("list_recent_user_messages",)
    _ASYNC_WRITES: ClassVar[tuple[str, ...]] = ("rewind_to_message", "restore_rewound")

    def rewind_to_message(self, session_id: str, target_message_id: int) -> dict[str, Any]:
        """Take the session out of the live context from user message ``target_message_id``
        on (that message included), keeping the rows on disk.

        Returns ``{"rewound_count", "target_message", "new_head_id"}``: how many live
        messages were rewound, the target's full row (``content`` decoded, ``tool_calls``
        as stored JSON; a caller can offer it as the next prompt) and the id of the last
        message still live (``None`` when none is). ``rewind_count`` of the session goes
        up by one on every call, ``message_count`` stays. A target that is not a message
        of the session, or not a user message, raises ``ValueError`` and changes nothing.
        """
        target = require_int("target_message_id", target_message_id)
        return self._write(lambda db: rewind.rewind_to(db, session_id, target), "rewinding a session")

    def restore_rewound(self, session_id: str, since_message_id: int) -> int:
        """Bring every inactive message of the session with ``id >= since_message_id`` back
        into the live context; returns how many. Messages archived by compaction come
        back too. The session's counters are left as they are."""
        since = require_int("since_message_id", since_message_id)
        return self._write(lambda db: rewind.restore(db, session_id, since), "restoring rewound messages")

    def list_recent_user_messages(
        self, session_id: str, limit: int = 20, include_inactive: bool = False
    ) -> list[dict[str, Any]]:
        """The session's newest ``limit`` user messages, newest first, live ones only unless
        ``include_inactive``: ``{"id", "timestamp", "preview"}`` each, ``preview`` being the
        text on one line cut to 80 characters. A negative ``limit`` lists them all."""
        rows = int(limit)
        return self._query(
            lambda db: rewind.recent_user_messages(
                db, session_id, rows if rows >= 0 else None, bool(include_inactive)
            )
        )
