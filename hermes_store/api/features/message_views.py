"""Views around one message of a session (what the agent's session search tool shows),
and the platform-id probe the gateway uses to skip re-storing a user turn."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, ClassVar

from hermes_store.api.features.base import FacadeBase
from hermes_store.domain import codec
from hermes_store.domain.validation import require_int
from hermes_store.repository import message_views


class MessageViewMethods(FacadeBase):
    """``get_messages_around``, ``get_anchored_view`` and ``has_platform_message_id``."""

    _ASYNC_READS: ClassVar[tuple[str, ...]] = (
        "get_messages_around",
        "get_anchored_view",
        "has_platform_message_id",
    )
    _ASYNC_WRITES: ClassVar[tuple[str, ...]] = ()

    def get_messages_around(self, session_id: str, around_message_id: int, window: int = 5) -> dict[str, Any]:
        """Up to ``window`` messages before and after message ``around_message_id`` and the
        message itself, in id order: ``{"window", "messages_before", "messages_after"}``.

        The counts say how many rows each side holds, so a count below ``window`` means an
        end of the session was reached. Rows carry every column, ``content`` and
        ``tool_calls`` decoded; rewound and archived messages are included. A negative
        ``window`` counts as 0; an anchor that is not in the session gives an empty window.
        """
        anchor = require_int("around_message_id", around_message_id)
        span = max(0, require_int("window", window))
        return self._query(lambda db: message_views.around(db, session_id, anchor, span), snapshot=True)

    def get_anchored_view(
        self,
        session_id: str,
        around_message_id: int,
        window: int = 5,
        bookend: int = 3,
        keep_roles: Collection[str] | None = ("user", "assistant"),
    ) -> dict[str, Any]:
        """:meth:`get_messages_around` narrowed to ``keep_roles`` (the anchor always stays),
        plus the session's opening and closing: ``{"window", "messages_before",
        "messages_after", "bookend_start", "bookend_end"}``.

        ``bookend_start`` is the first ``bookend`` messages before the window and
        ``bookend_end`` the last ``bookend`` after it, in id order, both of ``keep_roles``
        and with content (tool-call-only turns are skipped; multimodal messages count).
        ``keep_roles=None`` keeps every role. A negative ``bookend`` counts as 0; an
        anchor that is not in the session gives empty lists and zero counts.
        """
        anchor = require_int("around_message_id", around_message_id)
        span = max(0, require_int("window", window))
        ends = max(0, require_int("bookend", bookend))
        roles = None if keep_roles is None else tuple(keep_roles)

        def view(db: Any) -> dict[str, Any]:
            found = message_views.around(db, session_id, anchor, span)
            rows = found["window"]
            start: list[dict[str, Any]] = []
            end: list[dict[str, Any]] = []
            if rows and ends:
                start, end = message_views.bookends(
                    db, session_id, rows[0]["id"], rows[-1]["id"], ends, roles
                )
            if roles is not None:
                found["window"] = [row for row in rows if row["id"] == anchor or row["role"] in roles]
            return {**found, "bookend_start": start, "bookend_end": end}

        return self._query(view, snapshot=True)

    def has_platform_message_id(self, session_id: str, platform_message_id: str) -> bool:
        """Whether the session already holds a message (live or not) with this chat
        platform id (a number matches its decimal text)."""
        wanted = codec.platform_message_text("platform_message_id", platform_message_id)
        if wanted is None:
            return False
        return self._query(lambda db: message_views.has_platform_message_id(db, session_id, wanted))
