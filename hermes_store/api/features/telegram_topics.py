"""Telegram DM topic mode: the ``SessionDB`` methods.

In topic mode a private Telegram chat runs each conversation in a forum topic of its
own, bound to one session. Every id is turned into text with ``str()`` first, as
Telegram's ids arrive as integers.

As upstream Hermes does, a SQLite store creates the two topic tables only when topic mode
is first used (turning it on, or binding a topic); until then the readers answer "off",
``None``, ``[]`` or 0 and create nothing. A PostgreSQL store has them from its schema on.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from hermes_store.api.features.base import FacadeBase
from hermes_store.domain.validation import require_count
from hermes_store.repository import telegram_topics


def _flag(value: Any) -> int | None:
    """A capability as stored: 1 or 0 for a known answer, ``None`` for not known."""
    return None if value is None else int(bool(value))


class TelegramTopicMethods(FacadeBase):
    """Turning topic mode on and off per chat, and binding topics to sessions."""

    _ASYNC_READS: ClassVar[tuple[str, ...]] = (
        "is_telegram_topic_mode_enabled",
        "get_telegram_topic_binding",
        "get_telegram_topic_binding_by_session",
        "list_telegram_topic_bindings_for_chat",
        "is_telegram_session_linked_to_topic",
        "list_unlinked_telegram_sessions_for_user",
    )
    _ASYNC_WRITES: ClassVar[tuple[str, ...]] = (
        "apply_telegram_topic_migration",
        "enable_telegram_topic_mode",
        "disable_telegram_topic_mode",
        "bind_telegram_topic",
        "delete_telegram_topic_binding",
    )

    def apply_telegram_topic_migration(self) -> None:
        """Create the topic tables and their indexes where missing (SQLite; PostgreSQL
        has them) and record that they have their current layout (version 2, where
        deleting a session deletes its binding), in one transaction. Idempotent."""
        self._write(telegram_topics.open_tables, "creating the Telegram topic tables")

    def enable_telegram_topic_mode(
        self,
        *,
        chat_id: str,
        user_id: str,
        has_topics_enabled: bool | None = None,
        allows_users_to_create_topics: bool | None = None,
    ) -> None:
        """Turn topic mode on for ``chat_id``, owned by ``user_id``.

        The two capabilities are stored as the chat's latest check (``None``: unknown),
        replacing earlier answers; ``activated_at`` keeps the first time the chat was
        turned on, ``updated_at`` and ``capability_checked_at`` become now.
        """
        chat, user = str(chat_id), str(user_id)
        capabilities = {
            "has_topics_enabled": _flag(has_topics_enabled),
            "allows_users_to_create_topics": _flag(allows_users_to_create_topics),
        }
        now = time.time()

        def work(db: Any) -> None:
            telegram_topics.open_tables(db)
            telegram_topics.enable(db, chat, user, capabilities, now)

        self._write(work, "enabling Telegram topic mode")

    def disable_telegram_topic_mode(self, *, chat_id: str, clear_bindings: bool = True) -> None:
        """Turn topic mode off for ``chat_id`` (nothing happens for a chat never turned on)
        and, unless ``clear_bindings`` is false, delete the chat's topic bindings."""
        chat, now = str(chat_id), time.time()
        self._write(
            lambda db: telegram_topics.disable(db, chat, bool(clear_bindings), now),
            "disabling Telegram topic mode",
        )

    def is_telegram_topic_mode_enabled(self, *, chat_id: str, user_id: str) -> bool:
        """Whether topic mode is on for ``chat_id`` with ``user_id`` as its user."""
        chat, user = str(chat_id), str(user_id)
        return self._query(lambda db: telegram_topics.is_enabled(db, chat, user))

    def get_telegram_topic_binding(self, *, chat_id: str, thread_id: str) -> dict[str, Any] | None:
        """The binding row of one topic (all its columns), or ``None``."""
        chat, thread = str(chat_id), str(thread_id)
        return self._query(lambda db: telegram_topics.binding(db, chat, thread))

    def get_telegram_topic_binding_by_session(self, *, session_id: str) -> dict[str, Any] | None:
        """The binding row of the topic the session is bound to, or ``None``."""
        session = str(session_id)
        return self._query(lambda db: telegram_topics.binding_of_session(db, session))

    def list_telegram_topic_bindings_for_chat(self, *, chat_id: str) -> list[dict[str, Any]]:
        """The chat's binding rows, the most recently updated first."""
        chat = str(chat_id)
        return self._query(lambda db: telegram_topics.bindings_of_chat(db, chat))

    def is_telegram_session_linked_to_topic(self, *, session_id: str) -> bool:
        """Whether the session is bound to a topic."""
        session = str(session_id)
        return self._query(lambda db: telegram_topics.is_linked(db, session))

    def bind_telegram_topic(
        self,
        *,
        chat_id: str,
        thread_id: str,
        user_id: str,
        session_key: str,
        session_id: str,
        managed_mode: str = "auto",
    ) -> None:
        """Bind the topic ``thread_id`` of ``chat_id`` to ``session_id``.

        Binding a topic again replaces its user, session key, session and mode (its
        ``linked_at`` stays). A session binds to one topic only: binding it to another
        raises ``ValueError("session is already linked to another Telegram topic")``. A
        session that does not exist raises the driver's ``IntegrityError``.
        """
        values = {
            "chat_id": str(chat_id),
            "thread_id": str(thread_id),
            "user_id": str(user_id),
            "session_key": str(session_key),
            "session_id": str(session_id),
            "managed_mode": str(managed_mode),
        }
        now = time.time()

        def work(db: Any) -> None:
            telegram_topics.open_tables(db)
            telegram_topics.bind(db, values, now)

        self._write(work, "binding a Telegram topic")

    def delete_telegram_topic_binding(self, *, chat_id: str, thread_id: str) -> int:
        """Delete one topic's binding (for a topic deleted in Telegram); returns how many
        rows went, 0 or 1. When the chat has no binding left, topic mode is turned off
        for it in the same transaction."""
        chat, thread, now = str(chat_id), str(thread_id), time.time()
        return self._write(
            lambda db: telegram_topics.delete_binding(db, chat, thread, now),
            "deleting a Telegram topic binding",
        )

    def list_unlinked_telegram_sessions_for_user(
        self, *, chat_id: str, user_id: str, limit: int = 10
    ) -> list[dict[str, Any]]:
        """The user's Telegram sessions not bound to any topic, most recently active first
        (at most ``limit``), each with ``last_active`` and ``preview`` as in
        ``list_sessions_rich``. ``chat_id`` is accepted and not used: sessions are the
        user's, whichever chat they came from. Archived and child sessions are included."""
        user, rows = str(user_id), require_count("limit", int(limit))
        return self._query(lambda db: telegram_topics.unlinked_sessions(db, user, rows))
