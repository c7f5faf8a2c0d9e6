"""In-place compaction: a session keeps its id while its live transcript is replaced by a
shorter one, the replaced messages staying on disk (archived) and searchable."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from hermes_store.api.features.base import FacadeBase
from hermes_store.domain.validation import require_str
from hermes_store.repository import compaction
from hermes_store.repository.conversation import messages_from_dicts


class CompactionMethods(FacadeBase):
    """``archive_and_compact`` and ``has_archived_messages``."""

    _ASYNC_READS: ClassVar[tuple[str, ...]] = ("has_archived_messages",)
    _ASYNC_WRITES: ClassVar[tuple[str, ...]] = ("archive_and_compact",)

    def archive_and_compact(self, session_id: str, compacted_messages: Sequence[dict[str, Any]]) -> int:
        """Archive the session's live messages and store ``compacted_messages`` (OpenAI-style
        dicts, as :meth:`replace_messages` takes them) as its new live transcript, in one
        transaction; returns how many were stored.

        Archived rows leave the live context (``get_messages`` and replay skip them) but
        stay on disk and in search; rewound rows are left as they are. A dict's
        ``timestamp`` is kept, so a message carried over keeps its time. The session's
        ``message_count`` and ``tool_call_count`` become those of the new list. A session
        that does not exist raises ``sqlite3.IntegrityError`` (when the list is not empty)
        and nothing changes.
        """
        require_str("session_id", session_id)
        prepared = messages_from_dicts(compacted_messages, self._encode_content)
        return self._write(
            lambda db: compaction.archive_and_compact(db, session_id, prepared), "compacting a session"
        )

    def has_archived_messages(self, session_id: str) -> bool:
        """Whether the session holds messages out of its live context: archived by
        compaction or rewound. Reads no message content."""
        return self._query(lambda db: compaction.has_inactive(db, session_id))
