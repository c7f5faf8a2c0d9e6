"""Gateway routing peers: the ``SessionDB`` methods.

The messaging gateway records on each session the peer it serves (its deterministic
``session_key`` and the platform's user, chat and thread), so that after a restart that
lost its routing index it can find the session a peer was talking to.
"""

from __future__ import annotations

from typing import Any, ClassVar

from hermes_store.api.features.base import FacadeBase
from hermes_store.domain.validation import optional_str, require_str
from hermes_store.repository import gateway_peers


class GatewayPeerMethods(FacadeBase):
    """Recording a session's gateway peer and finding a peer's latest session."""

    _ASYNC_READS: ClassVar[tuple[str, ...]] = ("find_latest_gateway_session_for_peer",)
    _ASYNC_WRITES: ClassVar[tuple[str, ...]] = ("record_gateway_session_peer",)

    def record_gateway_session_peer(
        self,
        session_id: str,
        *,
        source: str,
        user_id: str | None = None,
        session_key: str | None = None,
        chat_id: str | None = None,
        chat_type: str | None = None,
        thread_id: str | None = None,
    ) -> None:
        """Store the peer a gateway session serves on its row.

        Does nothing unless both ``session_id`` and ``session_key`` are given, or when the
        session does not exist. Every peer column is overwritten, ``None`` clearing it,
        ``source`` included.
        """
        if not session_id or not session_key:
            return
        require_str("session_id", session_id)
        peer = {
            "source": require_str("source", source),
            "session_key": require_str("session_key", session_key),
            "user_id": optional_str("user_id", user_id),
            "chat_id": optional_str("chat_id", chat_id),
            "chat_type": optional_str("chat_type", chat_type),
            "thread_id": optional_str("thread_id", thread_id),
        }
        self._write(lambda db: gateway_peers.record_peer(db, session_id, peer), "recording a gateway peer")

    def find_latest_gateway_session_for_peer(
        self,
        *,
        source: str,
        user_id: str | None = None,
        session_key: str | None = None,
        chat_id: str | None = None,
        chat_type: str | None = None,
        thread_id: str | None = None,
    ) -> dict[str, Any] | None:
        """The newest session of ``source`` the gateway can resume for this peer (all its
        columns), or ``None``; nothing without a ``session_key``.

        A session counts when it is live or was ended only by the gateway closing its agent
        (``end_reason = 'agent_close'``), and has messages. It is looked up by
        ``session_key``; when none matches and both ``chat_id`` and ``chat_type`` are
        given, by the whole peer (user, chat, chat type, thread; a missing value matching
        only a missing or empty one). Archived and child sessions are not left out.
        """
        if not session_key:
            return None

        def find(db: Any) -> dict[str, Any] | None:
            found = gateway_peers.latest_for_key(db, source, session_key)
            if found is not None or chat_id is None or chat_type is None:
                return found
            return gateway_peers.latest_for_peer(db, source, user_id, chat_id, chat_type, thread_id)

        return self._query(find)
